// Finds the files programs run: each process's executable and the shared
// libraries it maps, each file handed out once. What the uprobe sets (TLS,
// libuv) look through at start and again every second for programs
// started since.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "process_scan.h"

namespace kreplay {

class BinaryScan {
 public:
  using Visit = std::function<void(const std::string& path)>;

  // `libraries`: parts of the mapped files' names worth a look (e.g. "libssl.so").
  explicit BinaryScan(std::vector<std::string> libraries) : libraries_(std::move(libraries)) {}

  // `path` unless this file was handed out before.
  void Offer(const std::string& path, const Visit& visit);
  // Every process not seen before, or that exec'd since: ScanProcess.
  void Scan(const Visit& visit);
  // One process's executable (/proc/PID/exe), then the mapped files `libraries` names, through the
  // process's root (a container's files).
  void ScanProcess(pid_t pid, const Visit& visit);
  // Whether a second passed since the last Scan.
  bool Due() const { return std::chrono::steady_clock::now() - last_scan_ >= std::chrono::seconds(1); }

 private:
  std::vector<std::string> libraries_;
  // files handed out, by (device, inode)
  std::set<std::pair<dev_t, ino_t>> files_;
  // the processes walked, to tell those started or exec'd since
  ProcessScan processes_;
  std::chrono::steady_clock::time_point last_scan_{};
};

}  // namespace kreplay
