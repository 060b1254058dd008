// libuv threadpool probes (bpf/capture/uvpool.h): attached, when the agent
// follows a process's requests (its Node hook), to its executable or libuv.so
// if it defines uv__work_submit and the work functions its pool threads run
// (Node links libuv in and keeps the local symbols). A uprobe belongs to the
// file, so other processes running it are covered too. Only on demand: each
// uprobe's detach waits ~0.1 s for the kernel, one at a time, so probing every
// Node binary on a host made the agent's stop slow.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "binary_scan.h"

struct bpf_link;
struct bpf_program;

namespace kreplay {

struct UvPrograms {
  bpf_program* work_submit;
  bpf_program* queue_work;
  bpf_program* work_start;
};

class UvProbes {
 public:
  explicit UvProbes(UvPrograms programs) : programs_(programs), scan_({"libuv.so", "libnode.so"}) {}
  ~UvProbes() { Detach(); }
  UvProbes(const UvProbes&) = delete;
  UvProbes& operator=(const UvProbes&) = delete;

  // Probes the executable of process `pid` and the libuv it maps, unless they were looked at before.
  // Called from any thread.
  void Follow(pid_t pid);
  // The attached links, handed over for the caller to destroy (in parallel: each waits for a grace period).
  std::vector<bpf_link*> TakeLinks();
  void Detach();

 private:
  void Consider(const std::string& path);
  bool Attach(const std::string& path, const std::map<std::string, uint64_t>& symbols);

  UvPrograms programs_;
  // Follow and TakeLinks come from the JS thread and the poll thread
  std::mutex mutex_;
  std::vector<bpf_link*> links_;
  BinaryScan scan_;
};

}  // namespace kreplay
