// How CLOCK_BOOTTIME (the kernel's event timestamps) maps onto wall-clock time.
#pragma once

#include <cstdint>

namespace kreplay {

struct ClockOffset {
  int64_t offset_ns;  // CLOCK_REALTIME - CLOCK_BOOTTIME
  int64_t error_ns;   // the offset is exact to within this
};

ClockOffset MeasureClockOffset();

}  // namespace kreplay
