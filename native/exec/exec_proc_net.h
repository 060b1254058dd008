// A socket of another process described without holding it: when pidfd_getfd is
// denied (a container's seccomp profile gates it behind CAP_SYS_PTRACE), the fd's
// `socket:[inode]` and sock_diag (in our network namespace) or the tables of
// /proc/<tid>/net (tcp, tcp6, udp, udp6, unix) give what getsockopt, getpeername
// and getsockname would.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>

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

// Whether a TCP socket listens on `self`'s port (and its address, or any) in thread `tid`'s network
// namespace: what tells a connection the service accepted from one it made.
bool ListensOn(pid_t tid, const sockaddr_storage& self);

// The socket `inode` of thread `tid` (in its network namespace); false when no table lists it.
bool SocketFactsFromProc(pid_t tid, uint64_t inode, SocketFacts* out);

}  // namespace kreplay
