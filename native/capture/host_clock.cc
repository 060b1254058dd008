#include "host_clock.h"

#include <time.h>

#include <limits>

namespace kreplay {

namespace {

constexpr int kSamples = 10;

int64_t Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

// Reads the wall clock between two boot-clock reads; the tightest bracket
// (least disturbed by preemption) gives the offset.
ClockOffset MeasureClockOffset() {
  ClockOffset best{0, std::numeric_limits<int64_t>::max()};
  for (int i = 0; i < kSamples; i++) {
    const int64_t boot_before = Now(CLOCK_BOOTTIME);
    const int64_t real = Now(CLOCK_REALTIME);
    const int64_t boot_after = Now(CLOCK_BOOTTIME);
    const int64_t half_width = (boot_after - boot_before) / 2;
    if (half_width < best.error_ns) best = {real - (boot_before + half_width), half_width};
  }
  return best;
}

}  // namespace kreplay
