// The wall clock's steps as they happen: a timerfd on CLOCK_REALTIME armed with
// TFD_TIMER_CANCEL_ON_SET, which the kernel cancels (and makes readable) whenever the clock is set
// (settimeofday, clock_settime, an NTP step, a VM restored), polled on Node's loop.
#pragma once

#include <napi.h>

namespace kreplay {

// new ClockSetWatch(onSet) calls onSet() on the loop each time the wall clock is set; close()
// stops it. It does not keep the loop alive.
Napi::Function DefineClockSetWatch(Napi::Env env);

}  // namespace kreplay
