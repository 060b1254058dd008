// Finds the files programs run: each process's executable and the shared
// libraries it maps, each file handed out once. What the uprobe sets (TLS,
// libuv) look through for the programs found started (capture_engine.h's
// ScanProcesses). Scoped (probe_scope.h), only the processes in scope are
// looked through, and a file is handed out once for each of them.
#pragma once

#include <sys/types.h>

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
  void Scan(const ProcessScan::Changes& changes, const Visit& visit);
  // One process's executable (/proc/PID/exe), then the mapped files `libraries` names, through the
  // process's root (a container's files).
  void ScanProcess(pid_t pid, const Visit& visit);

 private:
  std::vector<std::string> libraries_;
  ProbeScope scope_;
  // files handed out, by (device, inode, process or -1)
  std::set<std::tuple<dev_t, ino_t, pid_t>> files_;
};

}  // namespace kreplay
