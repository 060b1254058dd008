#include "exec_target.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "exec_call.h"
#include "exec_proc_net.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

namespace kreplay {

namespace {

// Entries kept per cache before it starts over.
constexpr size_t kCacheEntries = 4096;

bool StartsWith(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

// The thread-group leader of `tid` (its Tgid), or -1.
pid_t ThreadGroupOf(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(tid));
  FILE* status = fopen(path, "re");
  if (!status) return -1;
  char line[256];
  pid_t tgid = -1;
  while (fgets(line, sizeof line, status))
    if (sscanf(line, "Tgid: %d", &tgid) == 1) break;
  fclose(status);
  return tgid;
}

// A pidfd for the thread `tid` (the seccomp notification names the calling thread, often not the
// leader): its own where the kernel has PIDFD_THREAD (6.9+; pidfd_open of a non-leader fails with
// ENOENT or EINVAL otherwise), else its thread group's, whose descriptor table threads share.
int ThreadPidfd(pid_t tid) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, tid, 0));
  if (pidfd >= 0 || (errno != EINVAL && errno != ENOENT)) return pidfd;
  pidfd = static_cast<int>(syscall(SYS_pidfd_open, tid, PIDFD_THREAD));
  if (pidfd >= 0) return pidfd;
  const pid_t tgid = ThreadGroupOf(tid);
  return tgid > 0 ? static_cast<int>(syscall(SYS_pidfd_open, tgid, 0)) : -1;
}

// A socket fd of another process, duplicated into ours (pidfd_getfd), or -1.
int DuplicateFd(pid_t tid, int fd) {
  const int pidfd = ThreadPidfd(tid);
  if (pidfd < 0) return -1;
  const int local = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0));
  close(pidfd);
  return local;
}

std::string InetPeer(const sockaddr_storage& peer) {
  char host[INET6_ADDRSTRLEN];
  if (peer.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&peer);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&peer);
  // an IPv4 peer of a dual-stack socket is shown as IPv4, as the agent shows it
  if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
    inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(in6->sin6_port));
  }
  inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
  return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
}

// The IP protocol's name as the agent writes it (core/model/target.ts, IP_PROTOCOLS).
std::string IpProtocolName(int protocol) {
  switch (protocol) {
    case IPPROTO_ICMP:
      return "icmp";
    case IPPROTO_TCP:
      return "tcp";
    case IPPROTO_UDP:
      return "udp";
    case IPPROTO_ICMPV6:
      return "icmpv6";
    case IPPROTO_SCTP:
      return "sctp";
    case IPPROTO_UDPLITE:
      return "udplite";
    case IPPROTO_RAW:
      return "raw";
    case 262:  // IPPROTO_MPTCP, missing from older headers
      return "mptcp";
    default:
      return "ip" + std::to_string(protocol);
  }
}

// A unix address as text: `/run/a.sock`, `@abstract`, or "" when unnamed.
std::string UnixPath(const sockaddr_storage& addr, socklen_t len) {
  const auto* un = reinterpret_cast<const sockaddr_un*>(&addr);
  const size_t path_len = len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
  if (path_len == 0) return "";
  // abstract names start with a NUL byte, shown as @ (and any NUL inside them too, as ss(8) does)
  if (un->sun_path[0] == '\0') {
    std::string name(un->sun_path + 1, path_len - 1);
    for (char& c : name)
      if (c == '\0') c = '@';
    return "@" + name;
  }
  return std::string(un->sun_path, strnlen(un->sun_path, path_len));
}

// What getsockopt, getpeername and getsockname say of a socket we hold.
SocketFacts FactsOf(int sock) {
  SocketFacts facts;
  socklen_t len = sizeof facts.domain;
  getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &facts.domain, &len);
  len = sizeof facts.protocol;
  getsockopt(sock, SOL_SOCKET, SO_PROTOCOL, &facts.protocol, &len);
  facts.peer_len = sizeof facts.peer;
  facts.connected = getpeername(sock, reinterpret_cast<sockaddr*>(&facts.peer), &facts.peer_len) == 0;
  facts.self_len = sizeof facts.self;
  if (getsockname(sock, reinterpret_cast<sockaddr*>(&facts.self), &facts.self_len) != 0) facts.self_len = 0;
  return facts;
}

}  // namespace

std::string SocketName(const SocketFacts& facts) {
  if (facts.domain == AF_INET || facts.domain == AF_INET6) {
    const std::string proto = IpProtocolName(facts.protocol);
    if (!facts.connected) return proto;
    // a connection a listener accepted: by the address it was accepted on (core/model/target.ts)
    return facts.accepted ? proto + " accepted " + InetPeer(facts.self) : proto + " " + InetPeer(facts.peer);
  }
  if (facts.domain == AF_UNIX) {
    std::string path = facts.connected ? UnixPath(facts.peer, facts.peer_len) : "";
    if (path.empty() && facts.self_len > 0) path = UnixPath(facts.self, facts.self_len);
    return path.empty() ? "unix" : "unix " + path;
  }
  return "socket";
}

const char* TargetKindName(TargetKind kind) {
  switch (kind) {
    case TargetKind::kFile:
      return "file";
    case TargetKind::kSocket:
      return "socket";
    case TargetKind::kPipe:
      return "pipe";
    case TargetKind::kChar:
      return "char";
    case TargetKind::kAnon:
      return "anon";
    case TargetKind::kOther:
      break;
  }
  return "other";
}

bool TargetResolver::Resolve(pid_t tid, int fd, Target* out) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%d/fd/%d", static_cast<int>(tid), fd);
  char link[4096];
  const ssize_t len = readlink(proc, link, sizeof link);
  if (len <= 0 || static_cast<size_t>(len) >= sizeof link) return false;
  out->name.assign(link, static_cast<size_t>(len));
  if (out->name[0] == '/') {
    auto known = path_kinds_.find(out->name);
    if (known != path_kinds_.end()) {
      out->kind = known->second;
      return true;
    }
    struct stat st {};
    if (stat(proc, &st) != 0) return false;
    out->kind = S_ISCHR(st.st_mode) ? TargetKind::kChar : S_ISREG(st.st_mode) ? TargetKind::kFile : TargetKind::kOther;
    if (path_kinds_.size() >= kCacheEntries) path_kinds_.clear();
    path_kinds_.emplace(out->name, out->kind);
    return true;
  }
  if (StartsWith(out->name, "pipe:")) {
    *out = {"pipe", TargetKind::kPipe};
    return true;
  }
  if (StartsWith(out->name, "socket:[")) {
    return ResolveSocket(tid, fd, strtoull(out->name.c_str() + 8, nullptr, 10), out);
  }
  out->kind = StartsWith(out->name, "anon_inode:") ? TargetKind::kAnon : TargetKind::kOther;
  return true;
}

bool FdFlags(pid_t tid, int fd, bool* nonblocking, bool* cloexec) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", static_cast<int>(tid), fd);
  FILE* file = fopen(path, "re");
  if (!file) return false;
  char line[256];
  bool found = false;
  while (!found && fgets(line, sizeof line, file)) {
    if (strncmp(line, "flags:", 6) != 0) continue;
    const unsigned long flags = strtoul(line + 6, nullptr, 8);
    *nonblocking = (flags & O_NONBLOCK) != 0;
    *cloexec = (flags & O_CLOEXEC) != 0;
    found = true;
  }
  fclose(file);
  return found;
}

bool SocketShape(pid_t tid, int fd, int* family, int* type) {
  const int sock = DuplicateFd(tid, fd);
  if (sock < 0) return false;
  socklen_t len = sizeof *family;
  const bool ok = getsockopt(sock, SOL_SOCKET, SO_DOMAIN, family, &len) == 0 &&
                  (len = sizeof *type, getsockopt(sock, SOL_SOCKET, SO_TYPE, type, &len) == 0);
  close(sock);
  return ok;
}

bool TargetResolver::ResolveConnect(pid_t tid, int fd, uint64_t addr, uint32_t len, Target* out) {
  sockaddr_storage peer{};
  if (len < sizeof(sa_family_t) || len > sizeof peer || !ReadBuildMemory(tid, addr, &peer, len)) return false;
  if (peer.ss_family == AF_UNIX) {
    const std::string path = UnixPath(peer, len);
    *out = {path.empty() ? "unix" : "unix " + path, TargetKind::kSocket};
    return true;
  }
  if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) return false;
  if (len < (peer.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6))) return false;
  // the protocol is the socket's; a socket kreplay may not duplicate is taken for TCP, the usual case
  int protocol = IPPROTO_TCP;
  const int sock = DuplicateFd(tid, fd);
  if (sock >= 0) {
    socklen_t size = sizeof protocol;
    getsockopt(sock, SOL_SOCKET, SO_PROTOCOL, &protocol, &size);
    close(sock);
  }
  *out = {IpProtocolName(protocol) + " " + InetPeer(peer), TargetKind::kSocket};
  return true;
}

void TargetResolver::Remember(uint64_t inode, const Target& target) {
  if (sockets_.size() >= kCacheEntries) sockets_.clear();
  sockets_[inode] = target;
}

bool TargetResolver::ResolveSocket(pid_t tid, int fd, uint64_t inode, Target* out) {
  auto known = sockets_.find(inode);
  if (known != sockets_.end()) {
    *out = known->second;
    return true;
  }
  const int sock = DuplicateFd(tid, fd);
  SocketFacts facts;
  if (sock >= 0) {
    facts = FactsOf(sock);
    close(sock);
    facts.accepted = Accepted(tid, facts);
  } else {
    // its protocol says which one table may list it (none for a netlink socket)
    const Lookup found = SocketFactsFromProc(tid, inode, TablesOf(SocketProtocolName(tid, fd)), &facts);
    if (found != Lookup::kFound) {
      *out = {"socket", TargetKind::kSocket};
      // no table kreplay can read will ever list it: not looked for again at each of its calls
      if (found == Lookup::kNowhere) Remember(inode, *out);
      return true;
    }
    peers_from_proc_++;
  }
  *out = {SocketName(facts), TargetKind::kSocket};
  // an unconnected socket may connect later: look it up again then
  if (facts.connected) Remember(inode, *out);
  return true;
}

}  // namespace kreplay
