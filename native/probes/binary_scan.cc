#include "binary_scan.h"

#include <sys/stat.h>

#include <fstream>

namespace kreplay {

void BinaryScan::Offer(const std::string& path, pid_t pid, const Visit& visit) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  if (files_.insert({st.st_dev, st.st_ino, pid}).second) visit(path, pid);
}

void BinaryScan::Scan(const ProcessScan::Changes& changes, const Visit& visit) {
  for (const pid_t pid : changes.started) {
    if (InScope(scope_, pid)) ScanProcess(pid, visit);
  }
}

void BinaryScan::ScanProcess(pid_t pid, const Visit& visit) {
  const pid_t in = scope_ ? pid : -1;
  Offer(ProcPath(pid, "exe"), in, visit);
  if (libraries_.empty()) return;
  std::ifstream maps(ProcPath(pid, "maps"));
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    for (const std::string& library : libraries_) {
      if (line.find(library, slash) == std::string::npos) continue;
      Offer(ProcPath(pid, "root") + line.substr(slash), in, visit);
      break;
    }
  }
}

}  // namespace kreplay
