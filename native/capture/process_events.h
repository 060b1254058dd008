// The processes the kernel saw start, exec or exit (bpf/capture/tasks.h's
// proc_events), for the two discoveries that would otherwise each walk /proc:
// the TLS and Go probes' (the poll thread) and the runtime hooks' (JS). Each
// takes the pids touched since its last take, or hears that some were lost
// (then it walks /proc, as it does at its start).
#pragma once

#include <linux/types.h>
#include <sys/types.h>

#include <memory>
#include <mutex>
#include <set>

#include "ring_reader.h"

namespace kreplay {

class ProcessEvents {
 public:
  enum Taker { kProbes = 0, kHooks = 1 };

  struct Touched {
    // processes that started, exec'd or exited since the last take (what they are now is /proc's)
    std::set<pid_t> pids;
    // false: some were lost (or the kernel's pids are not this /proc's): walk /proc
    bool complete = false;
    // false: the kernel's pids are never this /proc's (the agent in a pid namespace of its own)
    bool usable = false;
  };

  // map_fd: proc_events (data_bytes, a power of two); lost: proc_events_lost in the object's mapped .bss.
  // Throws CaptureFailure.
  ProcessEvents(int map_fd, uint32_t data_bytes, const volatile __u64* lost);

  // What arrived since `taker`'s last take; any thread.
  Touched Take(Taker taker);

 private:
  std::mutex mutex_;
  RingReader ring_;
  const volatile __u64* lost_;
  __u64 lost_seen_ = 0;
  // the kernel's pids are the ones this /proc shows: the agent runs in the initial pid namespace
  bool usable_;
  std::set<pid_t> pending_[2];
  bool complete_[2] = {true, true};
};

}  // namespace kreplay
