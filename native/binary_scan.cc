#include "binary_scan.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace kreplay {

namespace {

bool IsPid(const char* name) {
  for (const char* c = name; *c; c++) {
    if (*c < '0' || *c > '9') return false;
  }
  return *name != 0;
}

}  // namespace

std::string NamedBinary(const std::string& path) {
  char target[4096];
  const ssize_t n = path.compare(0, 6, "/proc/") == 0 ? readlink(path.c_str(), target, sizeof(target) - 1) : -1;
  return n > 0 ? std::string(target, static_cast<size_t>(n)) + " (" + path + ")" : path;
}

void BinaryScan::Offer(const std::string& path, const Visit& visit) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  if (files_.insert({st.st_dev, st.st_ino}).second) visit(path);
}

void BinaryScan::Scan(const Visit& visit) {
  last_scan_ = std::chrono::steady_clock::now();
  DIR* proc = opendir("/proc");
  if (!proc) return;
  std::map<pid_t, ino_t> alive;
  while (dirent* entry = readdir(proc)) {
    if (!IsPid(entry->d_name)) continue;
    const pid_t pid = std::atoi(entry->d_name);
    const std::string dir = std::string("/proc/") + entry->d_name;
    struct stat exe;
    // kernel threads have no executable
    if (stat((dir + "/exe").c_str(), &exe) != 0) continue;
    alive[pid] = exe.st_ino;
    auto known = processes_.find(pid);
    if (known == processes_.end() || known->second != exe.st_ino) ScanProcess(pid, visit);
  }
  closedir(proc);
  processes_ = std::move(alive);
}

void BinaryScan::ScanProcess(pid_t pid, const Visit& visit) {
  const std::string dir = "/proc/" + std::to_string(pid);
  Offer(dir + "/exe", visit);
  if (libraries_.empty()) return;
  std::ifstream maps(dir + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    for (const std::string& library : libraries_) {
      if (line.find(library, slash) == std::string::npos) continue;
      Offer(dir + "/root" + line.substr(slash), visit);
      break;
    }
  }
}

}  // namespace kreplay
