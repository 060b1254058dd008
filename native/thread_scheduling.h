// What the daemon's replay clock thread needs from the system: real-time
// scheduling, a doorbell to the main thread that takes no lock, and its own
// descriptor of each stream socket it writes replay frames to.
#pragma once

#include <sys/types.h>

#include "native_error.h"

namespace kreplay {

// Scheduling failures are the clock's, not the capture's: E_SCHED, E_SCHED_PERM.
class SchedulingFailure : public NativeFailure {
 public:
  using NativeFailure::NativeFailure;
};

// Puts thread `tid` of this process under SCHED_FIFO at `priority`, so that
// it preempts ordinary threads when its deadline comes. Throws a
// SchedulingFailure (E_SCHED_PERM without CAP_SYS_NICE, else E_SCHED).
void SetRealtimeScheduling(pid_t tid, int priority);

// A non-blocking, close-on-exec pipe: {read end, write end}. Throws a
// NativeFailure (E_PIPE) when none can be made.
struct PipeEnds {
  int read_fd;
  int write_fd;
};
PipeEnds MakeDoorbellPipe();

// A close-on-exec duplicate of `fd` (the same open socket), which the clock
// thread owns and closes. Throws a NativeFailure (E_DUP) when none can be made.
int DuplicateFd(int fd);

}  // namespace kreplay
