// Go's goroutines (bpf/capture/golang.h): finds the Go processes, attaches
// the runtime and net/http probes to each Go binary whose goroutines can be
// followed, and tells the kernel about each process (go_processes). A
// process whose goroutines cannot be followed (a stripped binary) is marked
// too, so its events carry none rather than a thread's, and its binary is
// named in one warning. Processes started later are found by the next scan;
// a uprobe belongs to the file, so a restarted server is probed at once.
#pragma once

#include <linux/types.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "go_binary.h"
#include "process_scan.h"

struct bpf_link;
struct bpf_program;
struct bpf_map;

namespace kreplay {

struct GoPrograms {
  bpf_program* newproc1;
  bpf_program* newproc1_ret;
  bpf_program* round_trip;
  bpf_program* read_loop;
  bpf_program* write_loop;
};

// golang.h's per-process state, and the core's units map (goroutines are units).
struct GoMaps {
  bpf_map* processes;
  bpf_map* exec_contexts;
  bpf_map* units;
  bpf_map* conns;
  bpf_map* loops;
  // go_tgids: one bit per tgid, in the object's mapped .bss
  __u64* tgids;
  size_t tgid_words;
};

class GoProbes {
 public:
  GoProbes(GoPrograms programs, GoMaps maps) : programs_(programs), maps_(maps) {}
  ~GoProbes() { Detach(); }
  GoProbes(const GoProbes&) = delete;
  GoProbes& operator=(const GoProbes&) = delete;

  // Every process not seen before (or that exec'd since); forgets those gone.
  void Scan();
  // Scan, at most once a second.
  void ScanIfDue();
  void Detach();

 private:
  struct Binary {
    GoBinary go;
    std::vector<bpf_link*> links;
  };

  // The binary a process runs, inspected (and probed) the first time it is seen; NULL when unreadable.
  Binary* BinaryOf(pid_t pid);
  // Probes the binary; false (nothing left attached, the reason in go.unfollowed) when one fails.
  bool Attach(const std::string& path, Binary& binary);
  void Mark(pid_t pid, const GoBinary& go);
  void Forget(pid_t pid);
  // Drops what the kernel keeps of a process's goroutines and pool connections.
  void Purge(pid_t pid);

  GoPrograms programs_;
  GoMaps maps_;
  ProcessScan processes_;
  // processes marked here (an exec removes the kernel's entry before a walk sees it)
  std::set<pid_t> marked_;
  std::map<std::pair<dev_t, ino_t>, Binary> binaries_;
  std::chrono::steady_clock::time_point last_scan_{};
};

}  // namespace kreplay
