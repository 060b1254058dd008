#include "exec_proc_net.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "sock_diag.h"

namespace kreplay {

namespace {

// A socket address of `family` from an address in network order (4 or 16 bytes) and a port.
void InetAddress(int family, const __be32 (&address)[4], __be16 port, sockaddr_storage* out, socklen_t* len) {
  memset(out, 0, sizeof *out);
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(out);
    in->sin_family = AF_INET;
    in->sin_port = port;
    memcpy(&in->sin_addr, address, 4);
    *len = sizeof *in;
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = port;
    memcpy(&in6->sin6_addr, address, 16);
    *len = sizeof *in6;
  }
}

// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the kernel prints each 32-bit
// word of the address as the host-order integer its bytes make, and the port as a number.
bool ParseInet(const std::string& text, int family, sockaddr_storage* out, socklen_t* len) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  const std::string hex = text.substr(0, colon);
  const uint16_t port = static_cast<uint16_t>(strtoul(text.c_str() + colon + 1, nullptr, 16));
  const size_t words = family == AF_INET ? 1 : 4;
  if (hex.size() != words * 8) return false;
  // each word's bytes in memory are the address's, in network order
  __be32 raw[4] = {};
  for (size_t i = 0; i < words; i++) raw[i] = static_cast<__be32>(strtoul(hex.substr(i * 8, 8).c_str(), nullptr, 16));
  InetAddress(family, raw, htons(port), out, len);
  return true;
}

bool PortOf(const sockaddr_storage& addr) {
  return addr.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(addr).sin_port != 0
                                   : reinterpret_cast<const sockaddr_in6&>(addr).sin6_port != 0;
}

// A line of /proc/<tid>/net/{tcp,tcp6,udp,udp6}: local, remote, state, queues, timer, retransmits, uid, timeout, inode.
bool FindInet(pid_t tid, const char* table, int family, int protocol, uint64_t inode, SocketFacts* out) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/net/" + table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    uint64_t ino = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> ino))
      continue;
    if (ino != inode) continue;
    out->domain = family;
    out->protocol = protocol;
    if (!ParseInet(local, family, &out->self, &out->self_len) || !ParseInet(remote, family, &out->peer, &out->peer_len))
      return false;
    out->connected = PortOf(out->peer);
    return true;
  }
  return false;
}

// /proc/<tid>/net/unix: Num RefCount Protocol Flags Type St Inode [Path]; the path of `inode`, "" when unnamed.
bool UnixPathOf(pid_t tid, uint64_t inode, std::string* path) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/net/unix");
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string num, refs, protocol, flags, type, state;
    uint64_t ino = 0;
    if (!(fields >> num >> refs >> protocol >> flags >> type >> state >> ino) || ino != inode) continue;
    path->clear();
    fields >> *path;
    return true;
  }
  return false;
}

// What sock_diag knows of unix socket `inode` in our network namespace: its bound name (an abstract
// one's leading NUL shown as @, as /proc shows it; "" when unnamed) and its peer's inode (0 when it
// has none); false when it knows no unix socket `inode`. One exact lookup by inode, where a read of
// /proc/<tid>/net/unix formats every unix socket of the namespace.
bool UnixDiag(uint64_t inode, std::string* name, uint64_t* peer) {
  const int sock = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (sock < 0) return false;
  struct {
    nlmsghdr header;
    unix_diag_req request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;
  message.request.sdiag_family = AF_UNIX;
  message.request.udiag_states = ~0u;
  message.request.udiag_ino = static_cast<uint32_t>(inode);
  message.request.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_PEER;
  message.request.udiag_cookie[0] = message.request.udiag_cookie[1] = ~0u;  // INET_DIAG_NOCOOKIE
  bool found = false;
  if (inode <= UINT32_MAX && send(sock, &message, sizeof message, 0) == static_cast<ssize_t>(sizeof message)) {
    alignas(nlmsghdr) char buf[8192];
    const ssize_t got = recv(sock, buf, sizeof buf, 0);
    const auto* header = reinterpret_cast<const nlmsghdr*>(buf);
    if (got > 0 && NLMSG_OK(header, static_cast<size_t>(got)) && header->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      const auto* reply = static_cast<const unix_diag_msg*>(NLMSG_DATA(header));
      found = reply->udiag_ino == inode;
      name->clear();
      *peer = 0;
      int left = static_cast<int>(header->nlmsg_len - NLMSG_LENGTH(sizeof *reply));
      for (const auto* attr = reinterpret_cast<const rtattr*>(reply + 1); found && RTA_OK(attr, left);
           attr = RTA_NEXT(attr, left)) {
        if (attr->rta_type == UNIX_DIAG_PEER) *peer = *static_cast<const uint32_t*>(RTA_DATA(attr));
        if (attr->rta_type != UNIX_DIAG_NAME) continue;
        name->assign(static_cast<const char*>(RTA_DATA(attr)), RTA_PAYLOAD(attr));
        if (!name->empty() && (*name)[0] == '\0') (*name)[0] = '@';
        // a path bound with its terminating NUL counted in the address's length
        while (!name->empty() && name->back() == '\0') name->pop_back();
      }
    }
  }
  close(sock);
  return found;
}

void UnixAddress(const std::string& path, sockaddr_storage* out, socklen_t* len) {
  memset(out, 0, sizeof *out);
  auto* un = reinterpret_cast<sockaddr_un*>(out);
  un->sun_family = AF_UNIX;
  const size_t n = std::min(path.size(), sizeof un->sun_path - 1);
  // /proc shows an abstract name's leading NUL as @; kept as @, which is how it is named anyway
  memcpy(un->sun_path, path.data(), n);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n);
}

// Whether a line of /proc/<tid>/net/`table` is a listener (state 0A) on `port`.
bool ListenerIn(pid_t tid, const char* table, uint16_t port) {
  std::ifstream in("/proc/" + std::to_string(tid) + "/net/" + table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    if (!(fields >> slot >> local >> remote >> state) || state != "0A") continue;
    const size_t colon = local.find(':');
    if (colon != std::string::npos && strtoul(local.c_str() + colon + 1, nullptr, 16) == port) return true;
  }
  return false;
}

// Whether thread `tid` is in our network namespace, the one sock_diag answers for.
bool OurNetns(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/net", static_cast<int>(tid));
  struct stat ours {
  }, theirs{};
  return stat("/proc/self/ns/net", &ours) == 0 && stat(path, &theirs) == 0 && ours.st_dev == theirs.st_dev &&
         ours.st_ino == theirs.st_ino;
}

// Whether a TCP socket of `family` listens on `port` in our network namespace: 1 or 0, -1 when the
// kernel cannot say. Asked for listeners, sock_diag walks the listening table only.
int DiagListener(int family, uint16_t port) {
  return DiagFind(family, IPPROTO_TCP, 1u << TCP_LISTEN,
                  [port](const inet_diag_msg& msg) { return ntohs(msg.id.idiag_sport) == port; });
}

// The inet socket `inode` in our network namespace, by sock_diag: 1, 0 when none of the four tables
// holds it, -1 when the kernel cannot say. TIME_WAIT is skipped: its sockets have no inode, and a busy
// host holds thousands.
int DiagInet(uint64_t inode, SocketFacts* out) {
  constexpr uint32_t kAllButTimeWait = ~0u & ~(1u << TCP_TIME_WAIT);
  const struct {
    int family, protocol;
  } tables[] = {{AF_INET, IPPROTO_TCP}, {AF_INET6, IPPROTO_TCP}, {AF_INET, IPPROTO_UDP}, {AF_INET6, IPPROTO_UDP}};
  for (const auto& table : tables) {
    const int found = DiagFind(table.family, table.protocol, kAllButTimeWait, [&](const inet_diag_msg& msg) {
      if (msg.idiag_inode != inode) return false;
      out->domain = table.family;
      out->protocol = table.protocol;
      InetAddress(table.family, msg.id.idiag_src, msg.id.idiag_sport, &out->self, &out->self_len);
      InetAddress(table.family, msg.id.idiag_dst, msg.id.idiag_dport, &out->peer, &out->peer_len);
      out->connected = msg.id.idiag_dport != 0;
      return true;
    });
    if (found != 0) return found;
  }
  return 0;
}

}  // namespace

bool ListensOn(pid_t tid, const sockaddr_storage& self) {
  if (self.ss_family != AF_INET && self.ss_family != AF_INET6) return false;
  const uint16_t port = ntohs(self.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(self).sin_port
                                                        : reinterpret_cast<const sockaddr_in6&>(self).sin6_port);
  if (port == 0) return false;
  if (OurNetns(tid)) {
    const int v4 = DiagListener(AF_INET, port);
    const int any = v4 == 0 ? DiagListener(AF_INET6, port) : v4;
    if (any >= 0) return any == 1;
  }
  // another namespace's tables, or a kernel without inet_diag: the build's own /proc view
  return ListenerIn(tid, "tcp", port) || ListenerIn(tid, "tcp6", port);
}

bool SocketFactsFromProc(pid_t tid, uint64_t inode, SocketFacts* out) {
  std::string self, peer;
  uint64_t peer_inode = 0;
  // in our network namespace sock_diag answers: a unix socket by one exact lookup, then the inet tables.
  // /proc's text tables (milliseconds each on a host with many connections, which a hold's first call
  // waited for) only where it cannot: another namespace, a kernel without the diag modules.
  const bool our_netns = OurNetns(tid);
  if (our_netns && UnixDiag(inode, &self, &peer_inode)) {
    out->domain = AF_UNIX;
    UnixAddress(self, &out->self, &out->self_len);
    out->connected = peer_inode != 0;
    uint64_t none = 0;
    if (out->connected && UnixDiag(peer_inode, &peer, &none))
      UnixAddress(peer, &out->peer, &out->peer_len);
    else
      out->peer_len = 0;
    return true;
  }
  const int inet = our_netns ? DiagInet(inode, out) : -1;
  if (inet == 1) return true;
  if (inet < 0 && (FindInet(tid, "tcp", AF_INET, IPPROTO_TCP, inode, out) ||
                   FindInet(tid, "tcp6", AF_INET6, IPPROTO_TCP, inode, out) ||
                   FindInet(tid, "udp", AF_INET, IPPROTO_UDP, inode, out) ||
                   FindInet(tid, "udp6", AF_INET6, IPPROTO_UDP, inode, out)))
    return true;
  // another network namespace's unix socket, or a kernel without unix_diag: the build's own /proc view,
  // which names no peer
  if (!UnixPathOf(tid, inode, &self)) return false;
  out->domain = AF_UNIX;
  UnixAddress(self, &out->self, &out->self_len);
  out->connected = false;
  out->peer_len = 0;
  return true;
}

}  // namespace kreplay
