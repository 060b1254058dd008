// Go's goroutines (bpf/capture/golang.h): finds the Go processes, attaches
// the runtime and net/http probes to each Go binary whose goroutines can be
// followed, and tells the kernel about each process (go_processes). A
// process whose goroutines cannot be followed (a stripped binary) is marked
// too, so its events carry none rather than a thread's, and its binary is
// named in one warning. Processes started later are found by the next scan
// (capture_engine.h's ScanProcesses); a uprobe belongs to the file, so a
// restarted server is probed at once.
// Scoped (probe_scope.h), the probes go to each process in scope alone, and
// other Go processes are neither probed nor marked.
#pragma once

#include <linux/types.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "go_binary.h"
#include "probe_scope.h"
#include "process_scan.h"

struct bpf_link;
struct bpf_program;
struct bpf_map;

namespace kreplay {

struct GoPrograms {
  bpf_program* newproc1;
  bpf_program* newproc1_runnable;
  bpf_program* newproc1_ret;
  bpf_program* round_trip;
  bpf_program* conn_write;
  bpf_program* read_loop;
  bpf_program* h2_headers;
  bpf_program* tls_read;
  bpf_program* tls_read_ret;
  bpf_program* chansend;
  bpf_program* chanrecv;
  bpf_program* chanrecv_ret;
  bpf_program* chanrecv1_ret;
  bpf_program* chanrecv2_ret;
};

// golang.h's per-binary and per-process state, and the core's units map (goroutines are units).
struct GoMaps {
  bpf_map* binaries;
  bpf_map* processes;
  bpf_map* exec_contexts;
  bpf_map* units;
  bpf_map* conns;
  bpf_map* streams;
  bpf_map* tls_reads;
  // go_tgids: one bit per tgid, in the object's mapped .bss
  __u64* tgids;
  size_t tgid_words;
};

class GoProbes {
 public:
  GoProbes(GoPrograms programs, GoMaps maps, ProbeScope scope)
      : programs_(programs), maps_(maps), scope_(std::move(scope)) {}
  ~GoProbes() { Detach(); }
  GoProbes(const GoProbes&) = delete;
  GoProbes& operator=(const GoProbes&) = delete;

  // Every process `changes` says started (or exec'd); forgets those gone. `processes`: the scan that
  // made them, which says which are alive.
  void Scan(const ProcessScan::Changes& changes, const ProcessScan& processes);
  // The links, for a caller that destroys them with others' (CaptureEngine::Detach).
  std::vector<bpf_link*> TakeLinks();
  void Detach();

 private:
  struct Binary {
    GoBinary go;
    // its probes in every process (whole host)
    std::vector<bpf_link*> links;
    // the file's when inspected: a file rewritten in place is inspected again
    int64_t mtime_ns = 0;
  };

  // The binary a process runs, inspected (and probed, whole host) the first time it is seen; NULL when unreadable.
  Binary* BinaryOf(pid_t pid);
  // Probes the binary in process `pid` (-1: in every process); empty (nothing left attached) with the reason in
  // *why when one fails.
  std::vector<bpf_link*> Attach(const std::string& path, const GoBinary& go, pid_t pid, std::string* why);
  // Scoped: the probes in the process alone; false (logged) when they could not be attached.
  bool AttachTo(pid_t pid, const GoBinary& go);
  void Unprobe(Binary& binary);
  // Scoped: the process's own probes.
  void Unprobe(pid_t pid);
  // Whether the kernel marked the process followed when it exec'd a binary inspected before.
  bool FollowedAtExec(pid_t pid) const;
  // purged: whether the last purge read the kernel's tables whole (else nothing new is followed); probed: whether
  // its goroutines can be followed (the binary's probes are in it)
  void Mark(pid_t pid, const GoBinary& go, bool probed, bool purged);
  void Forget(pid_t pid);
  // Drops what the kernel keeps of the processes' goroutines, pool connections, HTTP/2 streams and TLS reads (one
  // walk of each map).
  bool Purge(const std::set<__u32>& tgids);

  GoPrograms programs_;
  GoMaps maps_;
  ProbeScope scope_;
  // processes marked here (an exec removes the kernel's entry before a walk sees it)
  std::set<pid_t> marked_;
  // processes forgotten in this scan, purged together at its end
  std::set<__u32> forgotten_;
  // by file (the kernel's device encoding, inode)
  std::map<std::pair<__u64, __u64>, Binary> binaries_;
  // scoped: each process's own probes
  std::map<pid_t, std::vector<bpf_link*>> process_links_;
};

}  // namespace kreplay
