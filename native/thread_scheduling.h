// Real-time scheduling for the daemon's replay clock thread.
#pragma once

#include <sys/types.h>

namespace kreplay {

// Puts thread `tid` of this process under SCHED_FIFO at `priority`, so that
// it preempts ordinary threads when its deadline comes. Throws a
// CaptureFailure (E_SCHED_PERM without CAP_SYS_NICE, else E_SCHED).
void SetRealtimeScheduling(pid_t tid, int priority);

}  // namespace kreplay
