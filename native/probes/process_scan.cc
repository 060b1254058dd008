#include "process_scan.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

namespace kreplay {

namespace {

bool IsPid(const char* name) {
  for (const char* c = name; *c; c++) {
    if (*c < '0' || *c > '9') return false;
  }
  return *name != 0;
}

}  // namespace

std::string ProcPath(pid_t pid, const char* what) { return "/proc/" + std::to_string(pid) + "/" + what; }

std::string Named(const std::string& path) {
  char target[4096];
  const ssize_t n = path.compare(0, 6, "/proc/") == 0 ? readlink(path.c_str(), target, sizeof(target) - 1) : -1;
  return n > 0 ? std::string(target, static_cast<size_t>(n)) + " (" + path + ")" : path;
}

ProcessScan::Changes ProcessScan::Update(const std::set<pid_t>& touched) {
  Changes changes;
  for (const pid_t pid : touched) {
    struct stat exe;
    const bool alive = stat(ProcPath(pid, "exe").c_str(), &exe) == 0;
    auto known = processes_.find(pid);
    if (known != processes_.end() && alive && known->second == exe.st_ino) continue;
    if (known != processes_.end()) {
      changes.gone.push_back(pid);
      processes_.erase(known);
    }
    if (!alive) continue;
    processes_[pid] = exe.st_ino;
    changes.started.push_back(pid);
  }
  return changes;
}

ProcessScan::Changes ProcessScan::Walk() {
  Changes changes;
  DIR* proc = opendir("/proc");
  if (!proc) return changes;
  std::map<pid_t, ino_t> alive;
  while (dirent* entry = readdir(proc)) {
    if (!IsPid(entry->d_name)) continue;
    const pid_t pid = std::atoi(entry->d_name);
    struct stat exe;
    if (stat(ProcPath(pid, "exe").c_str(), &exe) != 0) continue;
    alive[pid] = exe.st_ino;
    auto known = processes_.find(pid);
    if (known != processes_.end() && known->second == exe.st_ino) continue;
    if (known != processes_.end()) changes.gone.push_back(pid);
    changes.started.push_back(pid);
  }
  closedir(proc);
  for (const auto& [pid, ino] : processes_) {
    if (!alive.count(pid)) changes.gone.push_back(pid);
  }
  processes_ = std::move(alive);
  return changes;
}

}  // namespace kreplay
