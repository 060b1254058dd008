// Which attach points the running kernel offers.
#pragma once

#include <string>

struct btf;

namespace kreplay {

class KernelFeatures {
 public:
  // Loads the kernel's BTF; throws CaptureFailure E_CAPTURE_NO_BTF without it.
  KernelFeatures();
  ~KernelFeatures();
  KernelFeatures(const KernelFeatures&) = delete;
  KernelFeatures& operator=(const KernelFeatures&) = delete;

  // `section` is a program's section name: "tracepoint/<category>/<name>"
  // or "tp_btf/<name>".
  bool HasAttachPoint(const std::string& section) const;

 private:
  struct btf* vmlinux_;
  std::string tracefs_events_;
};

}  // namespace kreplay
