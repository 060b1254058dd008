#include "thread_scheduling.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
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

namespace {

// The kernel's struct sched_attr (linux/sched/types.h, which clashes with <sched.h>'s sched_param).
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

}  // namespace

bool SetShortestSlice(pid_t tid, bool own_only) {
  SchedAttr attr{};
  if (syscall(SYS_sched_getattr, tid, &attr, sizeof attr, 0) != 0 || attr.sched_policy != SCHED_OTHER) return false;
  // sched_setattr sets the nice value too: the one read back is kept
  attr.size = sizeof attr;
  // SCHED_FLAG_RESET_ON_FORK (linux/sched.h, which clashes with <sched.h>)
  attr.sched_flags = own_only ? 0x01 : 0;
  attr.sched_runtime = kShortestSliceNs;
  if (syscall(SYS_sched_setattr, tid, &attr, 0) != 0) return false;
  // kernels before custom slices take the call and ignore sched_runtime for SCHED_OTHER
  SchedAttr now{};
  return syscall(SYS_sched_getattr, tid, &now, sizeof now, 0) == 0 &&
         now.sched_runtime == static_cast<uint64_t>(kShortestSliceNs);
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
