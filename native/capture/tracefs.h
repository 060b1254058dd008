// tracefs, where the kernel lists the classic tracepoints libbpf attaches to.
#pragma once

namespace kreplay {

// Mounts tracefs at /sys/kernel/tracing unless its events are already
// visible; returns whether it mounted. Throws CaptureFailure when it cannot.
bool EnsureTracefs();

}  // namespace kreplay
