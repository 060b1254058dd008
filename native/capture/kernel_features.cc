#include "kernel_features.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include <cerrno>

#include "capture_error.h"

namespace kreplay {

namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

KernelFeatures::KernelFeatures() {
  struct stat st;
  if (stat("/sys/kernel/btf/vmlinux", &st) != 0) {
    throw CaptureFailure("E_CAPTURE_NO_BTF",
                         "/sys/kernel/btf/vmlinux is missing: kreplay needs a kernel built with "
                         "CONFIG_DEBUG_INFO_BTF=y (Linux 5.8 or newer with BTF)");
  }
  vmlinux_ = btf__load_vmlinux_btf();
  int err = libbpf_get_error(vmlinux_);
  if (err) {
    vmlinux_ = nullptr;
    throw LibbpfFailure(err, "E_CAPTURE_NO_BTF", "cannot read /sys/kernel/btf/vmlinux", "");
  }
  tracefs_events_ =
      IsDirectory("/sys/kernel/tracing/events") ? "/sys/kernel/tracing/events" : "/sys/kernel/debug/tracing/events";
}

KernelFeatures::~KernelFeatures() { btf__free(vmlinux_); }

bool KernelFeatures::HasAttachPoint(const std::string& section) const {
  if (StartsWith(section, "tracepoint/")) {
    return IsDirectory(tracefs_events_ + "/" + section.substr(sizeof("tracepoint/") - 1));
  }
  if (StartsWith(section, "tp_btf/")) {
    std::string type = "btf_trace_" + section.substr(sizeof("tp_btf/") - 1);
    return btf__find_by_name_kind(vmlinux_, type.c_str(), BTF_KIND_TYPEDEF) > 0;
  }
  return false;
}

}  // namespace kreplay
