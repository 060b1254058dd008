// Failures of the capture, each with the string code JS sees on its Error.
#pragma once

#include <string>

#include "native_error.h"

namespace kreplay {

class CaptureFailure : public NativeFailure {
 public:
  using NativeFailure::NativeFailure;
};

// Whether this process may load tracing programs (CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN).
bool HasBpfCapabilities();

// A libbpf step failed with errno `err`: a CaptureFailure with E_CAPTURE_PERM
// when privileges are the cause, else `code`, the message naming `what`.
CaptureFailure LibbpfFailure(int err, const char* code, const std::string& what, const std::string& advice);

}  // namespace kreplay
