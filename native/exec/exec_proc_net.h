// A socket of another process described without holding it: when pidfd_getfd is
// denied (a container's seccomp profile gates it behind CAP_SYS_PTRACE), the fd's
// `socket:[inode]` and sock_diag (in our network namespace) or the tables of
// /proc/<tid>/net (tcp, tcp6, udp, udp6, unix) give what getsockopt, getpeername
// and getsockname would.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kreplay {

struct SocketFacts {
  int domain = 0;
  int protocol = 0;
  bool connected = false;
  sockaddr_storage peer{};
  socklen_t peer_len = 0;
  sockaddr_storage self{};
  socklen_t self_len = 0;
  // a TCP connection a listener accepted (its local port is one thread `tid`'s network namespace listens on)
  bool accepted = false;
};

// Whether `facts` are of a TCP connection a listener accepted (a TCP socket listens on its local port in
// thread `tid`'s network namespace): what tells a connection the service accepted from one it made.
bool Accepted(pid_t tid, const SocketFacts& facts);

// The kernel's socket tables kreplay reads, a bit each: which may list a socket.
enum SocketTable : unsigned {
  kUnixTable = 1u << 0,
  kTcpTable = 1u << 1,
  kTcp6Table = 1u << 2,
  kUdpTable = 1u << 3,
  kUdp6Table = 1u << 4,
  kEveryTable = (1u << 5) - 1,
};

// The tables that may list a socket whose protocol sockfs names `name` (UNIX, UNIX-STREAM, TCP, TCPv6,
// UDP, UDPv6, NETLINK, …: the xattr system.sockprotoname): none for a protocol they do not hold, every
// one when the name is not known ("").
unsigned TablesOf(const std::string& name);

// The names of `tables` as /proc/<tid>/net names them (unix, tcp, tcp6, udp, udp6).
std::vector<std::string> TableNames(unsigned tables);

// The protocol name of socket fd `fd` of thread `tid` (from its /proc link, without holding it); "" when
// it cannot be read.
std::string SocketProtocolName(pid_t tid, int fd);

enum class Lookup {
  kFound,
  // not listed now (an unbound UDP socket is bound by its first send): look again at its next call
  kMissing,
  // never listed where kreplay can look: a protocol no table holds, or a unix socket in a network
  // namespace that is neither ours nor the build's (accepted from a client there)
  kNowhere,
};

// The socket `inode` of thread `tid`, looked for in `tables` (TablesOf): a unix socket by sock_diag in
// our network namespace whichever the build's is (an accepted one lives in its client's), then in the
// build's; inet sockets in the build's namespace. Its facts say whether it was accepted.
Lookup SocketFactsFromProc(pid_t tid, uint64_t inode, unsigned tables, SocketFacts* out);

// The socket `inode` as the text of a /proc/<tid>/net table (`table`: tcp, tcp6, udp, udp6 or unix) lists
// it, read as SocketFactsFromProc reads it (for tests); false when it does not list it.
bool SocketFactsFromText(const std::string& table, const std::string& text, uint64_t inode, SocketFacts* out);

}  // namespace kreplay
