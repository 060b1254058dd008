// What the daemon's replay clock thread and the replay supervisor need from
// the system: real-time scheduling (or a short slice without it), a doorbell
// to the main thread that takes no lock, and the clock's own descriptor of
// each stream socket it writes replay frames to.
#pragma once

#include <stdint.h>
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

// The fair scheduler's shortest time slice (EEVDF, Linux 6.12+: 0.1 ms).
constexpr int64_t kShortestSliceNs = 100'000;

// Without real-time priority: asks the fair scheduler for its shortest slice
// for thread `tid`, which needs no privilege. A thread with a shorter slice gets
// an earlier virtual deadline, so its wake-up preempts a busy neighbour at once
// instead of waiting out the neighbour's slice. Keeps the thread's nice value.
// False where the thread is not SCHED_OTHER or the kernel has no custom slices
// (it then keeps the default). A thread inherits the slice of the thread that
// starts it, unless `own_only`: threads it starts later then begin at the
// kernel's defaults (slice, and nice 0 where its nice value is negative).
bool SetShortestSlice(pid_t tid, bool own_only = false);

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
