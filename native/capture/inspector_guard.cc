#include "inspector_guard.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/types.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "capture_error.h"
#include "guard.h"
#include "inspector_guard.skel.h"
#include "js_error.h"
#include "kernel_features.h"
#include "native_log.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

namespace kreplay {

namespace {

constexpr const char* kCode = "E_NODE_GUARD";

// Where the cgroup v2 hierarchy is mounted (its root), or "" when it is not.
std::string CgroupV2Root() {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string field; fields >> field;) f.push_back(field);
    for (size_t i = 6; i + 1 < f.size(); i++)
      // a mount of the whole hierarchy ("/" as its root), not a cgroup namespace's view
      if (f[i] == "-" && f[i + 1] == "cgroup2" && f[3] == "/") return f[4];
  }
  return "";
}

// The cookie of the network namespace socket `fd` lives in, which the kernel side keys on.
uint64_t NetnsCookie(int fd) {
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0)
    throw CaptureFailure(kCode, std::string("cannot read the network namespace's cookie: ") + std::strerror(errno));
  return cookie;
}

// A TCP socket in the network namespace of process `pid` (a container's). setns moves only the
// calling thread, so a thread of its own enters it and ends: the agent's other threads stay
// where they are, and the socket, once made, belongs to the namespace it was made in.
int SocketIn(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
  const int ns = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) throw CaptureFailure(kCode, "cannot open " + path + ": " + std::strerror(errno));
  // the agent's own namespace: no setns, which needs CAP_SYS_ADMIN (an agent run as its unit has not)
  struct stat theirs = {};
  struct stat own = {};
  if (fstat(ns, &theirs) == 0 && stat("/proc/self/ns/net", &own) == 0 && theirs.st_dev == own.st_dev &&
      theirs.st_ino == own.st_ino) {
    close(ns);
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw CaptureFailure(kCode, std::string("cannot open a socket: ") + std::strerror(errno));
    return fd;
  }
  int fd = -1;
  int err = 0;
  std::thread([&] {
    if (setns(ns, CLONE_NEWNET) != 0) {
      err = errno;
      return;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) err = errno;
  }).join();
  close(ns);
  if (fd < 0)
    throw CaptureFailure(kCode, "cannot open a socket in the network namespace of process " + std::to_string(pid) +
                                    ": " + std::strerror(err));
  return fd;
}

// The socket's cookie; the socket closed either way.
uint64_t CookieClosing(int fd) {
  try {
    const uint64_t cookie = NetnsCookie(fd);
    close(fd);
    return cookie;
  } catch (...) {
    close(fd);
    throw;
  }
}

bool HasListenTracepoint() {
  try {
    return KernelFeatures().HasAttachPoint("tp_btf/inet_sock_set_state");
  } catch (const NativeFailure&) {
    return false;
  }
}

uint64_t OwnNetnsCookie() { return CookieClosing(SocketIn(getpid())); }

pid_t PidArgument(const Napi::CallbackInfo& info) {
  if (info.Length() < 1 || !info[0].IsNumber() || info[0].As<Napi::Number>().Int32Value() <= 0)
    throw Napi::TypeError::New(info.Env(), "a process id (a positive number) is needed");
  return info[0].As<Napi::Number>().Int32Value();
}

class InspectorGuard : public Napi::ObjectWrap<InspectorGuard> {
 public:
  explicit InspectorGuard(const Napi::CallbackInfo& info) : Napi::ObjectWrap<InspectorGuard>(info) {
    try {
      Open();
    } catch (const NativeFailure& failure) {
      Teardown();
      throw ToJsError(info.Env(), failure);
    }
  }
  ~InspectorGuard() override { Teardown(); }

  void RequireOpen(Napi::Env env) const {
    if (!skel_) throw ToJsError(env, CaptureFailure(kCode, "the inspector guard is closed"));
  }

  Napi::Value Guard(const Napi::CallbackInfo& info) { return Change(info, true); }
  // refusedTotal(): every connect refused since the guard was loaded
  Napi::Value RefusedTotal(const Napi::CallbackInfo& info) {
    RequireOpen(info.Env());
    const uint32_t zero = 0;
    uint64_t refused = 0;
    bpf_map_lookup_elem(bpf_map__fd(skel_->maps.refused_total), &zero, &refused);
    return Napi::Number::New(info.Env(), static_cast<double>(refused));
  }
  Napi::Value Unguard(const Napi::CallbackInfo& info) { return Change(info, false); }

  // listening(port, netns): a socket that started listening on the guarded port since it was
  // guarded listens still, or the kernel could not tell (its table full, its program not attached).
  Napi::Value Listening(const Napi::CallbackInfo& info) {
    const kr_guard_key key = Key(info);
    if (!listen_attached_) return Napi::Boolean::New(info.Env(), true);
    const uint32_t zero = 0;
    uint64_t lost = 0;
    bpf_map_lookup_elem(bpf_map__fd(skel_->maps.listeners_lost), &zero, &lost);
    if (lost > 0) return Napi::Boolean::New(info.Env(), true);
    const int fd = bpf_map__fd(skel_->maps.listeners);
    uint64_t sock = 0;
    bool first = true;
    for (;;) {
      uint64_t next = 0;
      if (bpf_map_get_next_key(fd, first ? nullptr : &sock, &next) != 0) break;
      first = false;
      sock = next;
      kr_guard_key held = {};
      if (bpf_map_lookup_elem(fd, &sock, &held) == 0 && held.netns_cookie == key.netns_cookie && held.port == key.port)
        return Napi::Boolean::New(info.Env(), true);
    }
    return Napi::Boolean::New(info.Env(), false);
  }

  Napi::Value Drain(const Napi::CallbackInfo& info) {
    seen_.clear();
    if (ring_) ring_buffer__consume(ring_);
    Napi::Array out = Napi::Array::New(info.Env(), seen_.size());
    for (uint32_t i = 0; i < seen_.size(); i++) {
      const kr_guard_intrusion& rec = seen_[i];
      Napi::Object o = Napi::Object::New(info.Env());
      o.Set("pid", rec.pid);
      o.Set("uid", rec.uid);
      o.Set("port", rec.port);
      o.Set("netns", Napi::BigInt::New(info.Env(), static_cast<uint64_t>(rec.netns_cookie)));
      o.Set("family", rec.family);
      o.Set("comm", std::string(rec.comm, strnlen(rec.comm, sizeof(rec.comm))));
      out.Set(i, o);
    }
    return out;
  }

  void Close(const Napi::CallbackInfo&) { Teardown(); }

  // netnsOf(pid): the cookie of the process's network namespace, for guard(port, cookie).
  Napi::Value Netns(const Napi::CallbackInfo& info) {
    const pid_t pid = PidArgument(info);
    try {
      return Napi::BigInt::New(info.Env(), CookieClosing(SocketIn(pid)));
    } catch (const NativeFailure& failure) {
      throw ToJsError(info.Env(), failure);
    }
  }

  // connectIn(pid, port): a descriptor connected to 127.0.0.1:port in the process's network
  // namespace. The connect is this process's, so a port guarded there lets it through.
  Napi::Value Connect(const Napi::CallbackInfo& info) {
    const pid_t pid = PidArgument(info);
    if (info.Length() != 2 || !info[1].IsNumber()) throw Napi::TypeError::New(info.Env(), "connectIn(pid, port)");
    const uint32_t port = info[1].As<Napi::Number>().Uint32Value();
    if (port == 0 || port > 65535) throw Napi::RangeError::New(info.Env(), "a port is 1 to 65535");
    try {
      const int fd = SocketIn(pid);
      sockaddr_in to = {};
      to.sin_family = AF_INET;
      to.sin_port = htons(static_cast<uint16_t>(port));
      to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
        const int err = errno;
        close(fd);
        throw CaptureFailure(kCode, "cannot connect to 127.0.0.1:" + std::to_string(port) +
                                        " in the network namespace of process " + std::to_string(pid) + ": " +
                                        std::strerror(err));
      }
      return Napi::Number::New(info.Env(), fd);
    } catch (const NativeFailure& failure) {
      throw ToJsError(info.Env(), failure);
    }
  }

 private:
  void Open() {
    if (!HasBpfCapabilities()) throw LibbpfFailure(EPERM, kCode, "cannot load the inspector guard", "");
    const std::string root = CgroupV2Root();
    if (root.empty()) throw CaptureFailure(kCode, "no cgroup v2 hierarchy is mounted: the inspector guard needs one");
    netns_cookie_ = OwnNetnsCookie();
    skel_ = inspector_guard__open();
    if (!skel_) throw LibbpfFailure(errno, kCode, "cannot open the inspector guard's BPF object", "");
    skel_->rodata->agent_tgid = static_cast<__u32>(getpid());
    if (!HasListenTracepoint()) bpf_program__set_autoload(skel_->progs.guard_listen, false);
    int err = inspector_guard__load(skel_);
    if (err) throw LibbpfFailure(err, kCode, "the kernel refused the inspector guard", "");
    cgroup_fd_ = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cgroup_fd_ < 0) throw CaptureFailure(kCode, "cannot open " + root + ": " + std::strerror(errno));
    // bpf_link attachments: beside any other program on the root, and gone with this process
    for (bpf_program* prog : {skel_->progs.guard_connect4, skel_->progs.guard_connect6}) {
      bpf_link* link = bpf_program__attach_cgroup(prog, cgroup_fd_);
      if (!link) throw LibbpfFailure(errno, kCode, "cannot attach the inspector guard to " + root, "");
      links_.push_back(link);
    }
    // without it the agent reads /proc at every look (listening() says yes): slower, as safe
    bpf_link* listen =
        bpf_program__autoload(skel_->progs.guard_listen) ? bpf_program__attach(skel_->progs.guard_listen) : nullptr;
    if (listen) {
      links_.push_back(listen);
      listen_attached_ = true;
    } else {
      AppendLog("warn", "sock:inet_sock_set_state cannot be followed: the Node inspector's watch reads /proc instead");
    }
    ring_ = ring_buffer__new(bpf_map__fd(skel_->maps.intrusions), &InspectorGuard::OnRecord, this, nullptr);
    if (!ring_) throw LibbpfFailure(errno, kCode, "cannot read the inspector guard's records", "");
  }

  static int OnRecord(void* ctx, void* data, size_t size) {
    if (size >= sizeof(kr_guard_intrusion))
      static_cast<InspectorGuard*>(ctx)->seen_.push_back(*static_cast<kr_guard_intrusion*>(data));
    return 0;
  }

  // The map key of the port argument, in the network namespace of the cookie argument (netnsOf()'s),
  // else in this process's.
  kr_guard_key Key(const Napi::CallbackInfo& info) {
    if (info.Length() < 1 || info.Length() > 2 || !info[0].IsNumber() || (info.Length() == 2 && !info[1].IsBigInt()))
      throw Napi::TypeError::New(info.Env(),
                                 "guard, unguard and listening take a port number and a network namespace's cookie");
    const uint32_t port = info[0].As<Napi::Number>().Uint32Value();
    if (port == 0 || port > 65535) throw Napi::RangeError::New(info.Env(), "a port is 1 to 65535");
    RequireOpen(info.Env());
    kr_guard_key key = {};
    key.netns_cookie = netns_cookie_;
    if (info.Length() == 2) {
      bool lossless = false;
      key.netns_cookie = info[1].As<Napi::BigInt>().Uint64Value(&lossless);
      if (!lossless) throw Napi::RangeError::New(info.Env(), "a network namespace's cookie is a 64-bit number");
    }
    key.port = port;
    return key;
  }

  Napi::Value Change(const Napi::CallbackInfo& info, bool on) {
    const kr_guard_key key = Key(info);
    const int fd = bpf_map__fd(skel_->maps.guarded);
    if (on) {
      const uint8_t held = 1;
      if (bpf_map_update_elem(fd, &key, &held, BPF_NOEXIST) != 0 && errno != EEXIST)
        throw ToJsError(info.Env(), LibbpfFailure(errno, kCode, "cannot guard port " + std::to_string(key.port), ""));
      return info.Env().Undefined();
    }
    bpf_map_delete_elem(fd, &key);
    return info.Env().Undefined();
  }

  void Teardown() {
    if (ring_) ring_buffer__free(ring_);
    ring_ = nullptr;
    for (bpf_link* link : links_) bpf_link__destroy(link);
    links_.clear();
    if (cgroup_fd_ >= 0) close(cgroup_fd_);
    cgroup_fd_ = -1;
    if (skel_) inspector_guard__destroy(skel_);
    skel_ = nullptr;
  }

  inspector_guard* skel_ = nullptr;
  std::vector<bpf_link*> links_;
  ring_buffer* ring_ = nullptr;
  int cgroup_fd_ = -1;
  bool listen_attached_ = false;
  uint64_t netns_cookie_ = 0;
  std::vector<kr_guard_intrusion> seen_;
};

}  // namespace

Napi::Function DefineInspectorGuard(Napi::Env env) {
  return InspectorGuard::DefineClass(env, "InspectorGuard",
                                     {
                                         InspectorGuard::InstanceMethod("guard", &InspectorGuard::Guard),
                                         InspectorGuard::InstanceMethod("unguard", &InspectorGuard::Unguard),
                                         InspectorGuard::InstanceMethod("refusedTotal", &InspectorGuard::RefusedTotal),
                                         InspectorGuard::InstanceMethod("listening", &InspectorGuard::Listening),
                                         InspectorGuard::InstanceMethod("drain", &InspectorGuard::Drain),
                                         InspectorGuard::InstanceMethod("close", &InspectorGuard::Close),
                                         InspectorGuard::InstanceMethod("netnsOf", &InspectorGuard::Netns),
                                         InspectorGuard::InstanceMethod("connectIn", &InspectorGuard::Connect),
                                     });
}

}  // namespace kreplay
