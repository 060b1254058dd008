// Finds the files programs run: each process's executable and the shared
// libraries it maps, each file handed out once. What the uprobe sets (TLS,
// libuv) look through at start and again every second for programs
// started since. Scoped (probe_scope.h), only the processes in scope are
// looked through, and a file is handed out once for each of them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "probe_scope.h"
#include "process_scan.h"

namespace kreplay {

class BinaryScan {
 public:
  // pid: the process to probe the file in; -1: every process that maps it
  using Visit = std::function<void(const std::string& path, pid_t pid)>;

  // `libraries`: parts of the mapped files' names worth a look (e.g. "libssl.so").
  explicit BinaryScan(std::vector<std::string> libraries, ProbeScope scope = std::nullopt)
      : libraries_(std::move(libraries)), scope_(std::move(scope)) {}

  // `path` unless this file was handed out before (for this process, scoped).
  void Offer(const std::string& path, pid_t pid, const Visit& visit);
  // Every process in scope not seen before, or that exec'd since: ScanProcess.
  void Scan(const Visit& visit);
  // One process's executable (/proc/PID/exe), then the mapped files `libraries` names, through the
  // process's root (a container's files).
  void ScanProcess(pid_t pid, const Visit& visit);
  // Whether a second passed since the last Scan.
  bool Due() const { return std::chrono::steady_clock::now() - last_scan_ >= std::chrono::seconds(1); }

 private:
  std::vector<std::string> libraries_;
  ProbeScope scope_;
  // files handed out, by (device, inode, process or -1)
  std::set<std::tuple<dev_t, ino_t, pid_t>> files_;
  // the processes walked, to tell those started or exec'd since
  ProcessScan processes_;
  std::chrono::steady_clock::time_point last_scan_{};
};

}  // namespace kreplay
