#include "exec_proc_net.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// The lines of a /proc table, read a few at a time at first: a reader that stops at the line it wants
// stops the kernel's walk there too. A read of 8 KiB has the kernel format lines until 8 KiB are filled
// or the table ends, and /proc/<tid>/net/tcp of a namespace with few sockets walks the whole host's
// connection hash for them (a millisecond per few thousand connections, TIME_WAIT ones included). Each
// read asks twice the last, up to 8 KiB, so that a long table costs few reads (udp's restarts its walk
// from the first bucket at each).
class ProcLines {
 public:
  explicit ProcLines(const std::string& path) : fd_(open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  // a table's text already read (the tests')
  struct Text {
    const std::string& text;
  };
  explicit ProcLines(Text text) : fd_(-1), pending_(text.text), from_text_(true) {}
  ~ProcLines() {
    if (fd_ >= 0) close(fd_);
  }
  ProcLines(const ProcLines&) = delete;
  ProcLines& operator=(const ProcLines&) = delete;

  // The next line, without its newline; false at the end (or when the table cannot be read).
  bool Next(std::string* line) {
    for (size_t newline; (newline = pending_.find('\n')) == std::string::npos;) {
      char chunk[kMaxRead];
      const ssize_t got = fd_ >= 0 ? read(fd_, chunk, ask_) : from_text_ ? 0 : -1;
      if (got <= 0) {
        ended_ = got == 0;
        return false;
      }
      pending_.append(chunk, static_cast<size_t>(got));
      ask_ = std::min(ask_ * 2, kMaxRead);
    }
    const size_t newline = pending_.find('\n');
    line->assign(pending_, 0, newline);
    pending_.erase(0, newline + 1);
    return true;
  }
  // whether Next returned false at the table's end, not on an error
  bool ended() const { return ended_; }

 private:
  static constexpr size_t kMaxRead = 8192;
  const int fd_;
  std::string pending_;
  // a line or two of tcp or tcp6 (150 and 178 bytes) at first
  size_t ask_ = 256;
  const bool from_text_ = false;
  bool ended_ = false;
};

uint16_t PortNumber(const sockaddr_storage& addr) {
  return ntohs(addr.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(addr).sin_port
                                         : reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
}

// A line of /proc/<tid>/net/{tcp,tcp6,udp,udp6}: local, remote, state, queues, timer, retransmits, uid, timeout,
// inode. A TCP table lists its listeners (state 0A) first: by the line of a connection, whether one listens
// on its port is known (`accepted`), without a second read of the table.
bool FindInet(ProcLines& in, int family, int protocol, uint64_t inode, SocketFacts* out) {
  std::string line;
  in.Next(&line);  // the header
  std::vector<uint16_t> listening;
  while (in.Next(&line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    uint64_t ino = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> ino))
      continue;
    if (ino != inode) {
      sockaddr_storage listener{};
      socklen_t len = 0;
      if (protocol == IPPROTO_TCP && state == "0A" && ParseInet(local, family, &listener, &len))
        listening.push_back(PortNumber(listener));
      continue;
    }
    out->domain = family;
    out->protocol = protocol;
    if (!ParseInet(local, family, &out->self, &out->self_len) || !ParseInet(remote, family, &out->peer, &out->peer_len))
      return false;
    out->connected = PortNumber(out->peer) != 0;
    out->accepted = out->connected && protocol == IPPROTO_TCP &&
                    std::find(listening.begin(), listening.end(), PortNumber(out->self)) != listening.end();
    return true;
  }
  return false;
}

// /proc/<tid>/net/unix: Num RefCount Protocol Flags Type St Inode [Path]. The path of `inode` ("" when
// unnamed) and whether it is connected (St 03, SS_CONNECTED: an accepted socket, a connected client):
// 1, 0 when the table does not list it, -1 when it cannot be read.
int FindUnix(ProcLines& in, uint64_t inode, std::string* path, bool* connected) {
  std::string line;
  if (!in.Next(&line)) return -1;
  while (in.Next(&line)) {
    std::istringstream fields(line);
    std::string num, refs, protocol, flags, type, state;
    uint64_t ino = 0;
    if (!(fields >> num >> refs >> protocol >> flags >> type >> state >> ino) || ino != inode) continue;
    path->clear();
    fields >> *path;
    *connected = state == "03";
    return 1;
  }
  return in.ended() ? 0 : -1;
}

// What sock_diag knows of unix socket `inode` in our network namespace: its bound name (an abstract
// one's leading NUL shown as @, as /proc shows it; "" when unnamed) and its peer's inode (0 when it
// has none): 1, 0 when our namespace has no unix socket `inode`, -1 when the kernel cannot say. One exact
// lookup by inode, where a read of /proc/<tid>/net/unix formats every unix socket of the namespace.
int UnixDiag(uint64_t inode, std::string* name, uint64_t* peer) {
  const int sock = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (sock < 0) return -1;
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
  int found = -1;
  if (inode <= UINT32_MAX && send(sock, &message, sizeof message, 0) == static_cast<ssize_t>(sizeof message)) {
    alignas(nlmsghdr) char buf[8192];
    const ssize_t got = recv(sock, buf, sizeof buf, 0);
    const auto* header = reinterpret_cast<const nlmsghdr*>(buf);
    // ENOENT: no unix socket of our namespace has that inode (another error: no unix_diag, say nothing)
    if (got > 0 && NLMSG_OK(header, static_cast<size_t>(got)) && header->nlmsg_type == NLMSG_ERROR)
      found = static_cast<const nlmsgerr*>(NLMSG_DATA(header))->error == -ENOENT ? 0 : -1;
    if (got > 0 && NLMSG_OK(header, static_cast<size_t>(got)) && header->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      const auto* reply = static_cast<const unix_diag_msg*>(NLMSG_DATA(header));
      found = reply->udiag_ino == inode ? 1 : -1;
      name->clear();
      *peer = 0;
      int left = static_cast<int>(header->nlmsg_len - NLMSG_LENGTH(sizeof *reply));
      for (const auto* attr = reinterpret_cast<const rtattr*>(reply + 1); found == 1 && RTA_OK(attr, left);
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

// The inet tables: their bit, family, protocol and file under /proc/<tid>/net.
struct InetTable {
  unsigned bit;
  int family, protocol;
  const char* proc;
};
constexpr InetTable kInetTables[] = {{kTcpTable, AF_INET, IPPROTO_TCP, "tcp"},
                                     {kTcp6Table, AF_INET6, IPPROTO_TCP, "tcp6"},
                                     {kUdpTable, AF_INET, IPPROTO_UDP, "udp"},
                                     {kUdp6Table, AF_INET6, IPPROTO_UDP, "udp6"}};

// The inet socket `inode` in our network namespace, by sock_diag, looked for in `tables`: 1, 0 when none
// of them holds it, -1 when the kernel cannot say. TIME_WAIT is skipped: its sockets have no inode, and
// a busy host holds thousands.
int DiagInet(uint64_t inode, unsigned tables, SocketFacts* out) {
  constexpr uint32_t kAllButTimeWait = ~0u & ~(1u << TCP_TIME_WAIT);
  for (const InetTable& table : kInetTables) {
    if (!(tables & table.bit)) continue;
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

// The inet socket `inode` in thread `tid`'s network namespace, from the text of its /proc tables in `tables`.
bool ProcInet(pid_t tid, uint64_t inode, unsigned tables, SocketFacts* out) {
  for (const InetTable& table : kInetTables) {
    if (!(tables & table.bit)) continue;
    ProcLines in("/proc/" + std::to_string(tid) + "/net/" + table.proc);
    if (FindInet(in, table.family, table.protocol, inode, out)) return true;
  }
  return false;
}

// What /proc/<tid>/net/unix says of a socket: its own address; no peer (the table names none).
void UnixFacts(const std::string& path, bool connected, SocketFacts* out) {
  out->domain = AF_UNIX;
  UnixAddress(path, &out->self, &out->self_len);
  out->connected = connected;
  out->peer_len = 0;
}

// Whether a TCP socket listens on `self`'s port (and its address, or any) in thread `tid`'s network
// namespace.
bool ListensOn(pid_t tid, const sockaddr_storage& self) {
  if (self.ss_family != AF_INET && self.ss_family != AF_INET6) return false;
  const uint16_t port = PortNumber(self);
  if (port == 0) return false;
  if (OurNetns(tid)) {
    const int v4 = DiagListener(AF_INET, port);
    const int any = v4 == 0 ? DiagListener(AF_INET6, port) : v4;
    if (any >= 0) return any == 1;
  }
  // another namespace's tables, or a kernel without inet_diag: the build's own /proc view
  return ListenerIn(tid, "tcp", port) || ListenerIn(tid, "tcp6", port);
}

}  // namespace

bool Accepted(pid_t tid, const SocketFacts& facts) {
  return facts.connected && facts.protocol == IPPROTO_TCP && ListensOn(tid, facts.self);
}

unsigned TablesOf(const std::string& name) {
  if (name.empty()) return kEveryTable;
  // UNIX (datagram, seqpacket) and UNIX-STREAM (Linux 5.15+; UNIX for all before)
  if (name.rfind("UNIX", 0) == 0) return kUnixTable;
  if (name == "TCP") return kTcpTable;
  if (name == "TCPv6") return kTcp6Table;
  if (name == "UDP") return kUdpTable;
  if (name == "UDPv6") return kUdp6Table;
  return 0;
}

std::string SocketProtocolName(pid_t tid, int fd) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(tid), fd);
  char name[64];
  const ssize_t len = getxattr(path, "system.sockprotoname", name, sizeof name);
  // the value counts its terminating NUL
  return len > 1 ? std::string(name, strnlen(name, static_cast<size_t>(len))) : "";
}

Lookup SocketFactsFromProc(pid_t tid, uint64_t inode, unsigned tables, SocketFacts* out) {
  if (tables == 0) return Lookup::kNowhere;
  // In our network namespace sock_diag answers: a unix socket by one exact lookup, the inet tables by a
  // binary dump. /proc's text tables (milliseconds each on a host with many connections, which a hold's
  // first call waited for) only where it cannot: another namespace, a kernel without the diag modules.
  const bool our_netns = OurNetns(tid);
  std::string self, peer;
  uint64_t peer_inode = 0;
  // A unix socket is looked for in our namespace whichever the build's is: one accepted from a client
  // lives in the client's namespace, which may be ours while the build has its own. Inode numbers are
  // the sockets' own across namespaces: a socket listed is the build's.
  const int unix_diag = tables & kUnixTable ? UnixDiag(inode, &self, &peer_inode) : -1;
  if (unix_diag == 1) {
    out->domain = AF_UNIX;
    UnixAddress(self, &out->self, &out->self_len);
    out->connected = peer_inode != 0;
    uint64_t none = 0;
    if (out->connected && UnixDiag(peer_inode, &peer, &none) == 1)
      UnixAddress(peer, &out->peer, &out->peer_len);
    else
      out->peer_len = 0;
    return Lookup::kFound;
  }
  const unsigned inet = tables & ~kUnixTable;
  const int diag_inet = inet != 0 && our_netns ? DiagInet(inode, inet, out) : -1;
  if (diag_inet == 1) {
    out->accepted = Accepted(tid, *out);
    return Lookup::kFound;
  }
  // the text tables say `accepted` themselves
  if (inet != 0 && diag_inet < 0 && ProcInet(tid, inode, inet, out)) return Lookup::kFound;
  if (!(tables & kUnixTable)) return Lookup::kMissing;
  // our namespace's table, which sock_diag has just read, is not read again as text
  bool connected = false;
  int listed = 0;
  if (!(our_netns && unix_diag == 0)) {
    ProcLines in("/proc/" + std::to_string(tid) + "/net/unix");
    listed = FindUnix(in, inode, &self, &connected);
  }
  if (listed == 1) {
    // the build's own namespace's table, which names no peer: the socket is named by its own address
    UnixFacts(self, connected, out);
    return Lookup::kFound;
  }
  // a unix socket (not merely maybe one) neither our table nor the build's lists: it is in a third
  // namespace, which a socket never leaves
  const bool both_read = listed == 0 && (unix_diag == 0 || our_netns);
  return tables == kUnixTable && both_read ? Lookup::kNowhere : Lookup::kMissing;
}

std::vector<std::string> TableNames(unsigned tables) {
  std::vector<std::string> names;
  if (tables & kUnixTable) names.emplace_back("unix");
  for (const InetTable& table : kInetTables)
    if (tables & table.bit) names.emplace_back(table.proc);
  return names;
}

bool SocketFactsFromText(const std::string& table, const std::string& text, uint64_t inode, SocketFacts* out) {
  ProcLines in(ProcLines::Text{text});
  if (table == "unix") {
    std::string path;
    bool connected = false;
    if (FindUnix(in, inode, &path, &connected) != 1) return false;
    UnixFacts(path, connected, out);
    return true;
  }
  for (const InetTable& inet : kInetTables)
    if (table == inet.proc) return FindInet(in, inet.family, inet.protocol, inode, out);
  return false;
}

}  // namespace kreplay
