#include "capture_error.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kreplay {

namespace {

bool HasCapability(const __user_cap_data_struct (&data)[2], int cap) {
  return (data[cap / 32].effective >> (cap % 32)) & 1;
}

}  // namespace

bool HasBpfCapabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return geteuid() == 0;
  return HasCapability(data, CAP_SYS_ADMIN) || (HasCapability(data, CAP_BPF) && HasCapability(data, CAP_PERFMON));
}

CaptureFailure LibbpfFailure(int err, const char* code, const std::string& what, const std::string& advice) {
  err = err < 0 ? -err : err;
  std::string text = what + ": " + std::strerror(err);
  // The verifier also answers EACCES for programs it rejects: blame
  // privileges only when they really are missing.
  if (err == EPERM || (err == EACCES && !HasBpfCapabilities())) {
    return CaptureFailure("E_CAPTURE_PERM", text +
                                                "; loading eBPF programs needs root, or CAP_BPF and CAP_PERFMON "
                                                "(CAP_SYS_ADMIN before Linux 5.8): run kreplay as root");
  }
  return CaptureFailure(code, advice.empty() ? text : text + "; " + advice);
}

}  // namespace kreplay
