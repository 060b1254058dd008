#include "tracefs.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "capture_error.h"

namespace kreplay {

bool EnsureTracefs() {
  struct stat st;
  if (stat("/sys/kernel/tracing/events", &st) == 0) return false;
  // mounted, but its root is mode 0700: mounting again would only hide that
  if (errno == EACCES) {
    throw CaptureFailure("E_CAPTURE_PERM",
                         "cannot read tracefs at /sys/kernel/tracing (mode 0700): run kreplay as root, or give it "
                         "CAP_DAC_READ_SEARCH beside CAP_BPF and CAP_PERFMON");
  }
  if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0) return true;
  const int err = errno;
  const std::string text = std::string("cannot mount tracefs at /sys/kernel/tracing: ") + std::strerror(err);
  if (err == EPERM || err == EACCES) {
    throw CaptureFailure("E_CAPTURE_PERM", text +
                                               "; run kreplay as root, or mount it first: "
                                               "mount -t tracefs nodev /sys/kernel/tracing");
  }
  throw CaptureFailure("E_CAPTURE_NO_TRACEPOINT", text + "; kreplay needs a kernel with tracefs (CONFIG_TRACING)");
}

}  // namespace kreplay
