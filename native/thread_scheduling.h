// What the daemon's replay clock thread needs from the system: real-time
// scheduling, and a doorbell to the main thread that takes no lock.
#pragma once

#include <sys/types.h>

#include <string>

#include "coded_error.h"

namespace kreplay {

// A thread could not be scheduled as asked: E_SCHED_PERM without the
// privilege, else E_SCHED.
class SchedulingFailure : public CodedError {
 public:
  using CodedError::CodedError;
};

// No pipe could be made: E_PIPE.
class PipeFailure : public CodedError {
 public:
  explicit PipeFailure(const std::string& message) : CodedError("E_PIPE", message) {}
};

// Puts thread `tid` of this process under SCHED_FIFO at `priority`, so that
// it preempts ordinary threads when its deadline comes. Throws a
// SchedulingFailure.
void SetRealtimeScheduling(pid_t tid, int priority);

// A non-blocking, close-on-exec pipe: {read end, write end}. Throws a
// PipeFailure when none can be made.
struct PipeEnds {
  int read_fd;
  int write_fd;
};
PipeEnds MakeDoorbellPipe();

}  // namespace kreplay
