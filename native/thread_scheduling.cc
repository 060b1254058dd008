#include "thread_scheduling.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "native_error.h"

namespace kreplay {

void SetRealtimeScheduling(pid_t tid, int priority) {
  if (tid <= 0) throw SchedulingFailure("E_SCHED", "no thread id " + std::to_string(tid));
  const int min = sched_get_priority_min(SCHED_FIFO);
  const int max = sched_get_priority_max(SCHED_FIFO);
  if (priority < min || priority > max)
    throw SchedulingFailure("E_SCHED", "SCHED_FIFO priority must be " + std::to_string(min) + ".." +
                                           std::to_string(max) + ", got " + std::to_string(priority));
  sched_param param{};
  param.sched_priority = priority;
  // sched_setscheduler takes a thread id on Linux: only that thread changes
  if (sched_setscheduler(tid, SCHED_FIFO, &param) == 0) return;
  const int err = errno;
  throw SchedulingFailure(err == EPERM ? "E_SCHED_PERM" : "E_SCHED",
                          "cannot put thread " + std::to_string(tid) + " under SCHED_FIFO: " + strerror(err) +
                              (err == EPERM ? " (needs CAP_SYS_NICE or an RLIMIT_RTPRIO allowance)" : ""));
}

PipeEnds MakeDoorbellPipe() {
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
    throw NativeFailure("E_PIPE", std::string("cannot make a pipe: ") + strerror(errno));
  return {fds[0], fds[1]};
}

int DuplicateFd(int fd) {
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0)
    throw NativeFailure("E_DUP", "cannot duplicate descriptor " + std::to_string(fd) + ": " + strerror(errno));
  return copy;
}

}  // namespace kreplay
