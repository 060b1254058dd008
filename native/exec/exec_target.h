// What a write of a supervised process goes to, named as the agent names a
// sys_write event's `target` (file path, `tcp 127.0.0.1:5432`, `unix /run/a.sock`,
// `pipe`), read from /proc/<tid>/fd/<fd> while the caller is blocked in the call.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "exec_proc_net.h"

namespace kreplay {

enum class TargetKind { kFile, kSocket, kPipe, kChar, kAnon, kOther };
const char* TargetKindName(TargetKind kind);

struct Target {
  std::string name;
  TargetKind kind = TargetKind::kOther;
};

// O_NONBLOCK and O_CLOEXEC of fd `fd` of thread `tid` (its fdinfo); false when it is gone.
bool FdFlags(pid_t tid, int fd, bool* nonblocking, bool* cloexec);

// The domain and type of socket fd `fd` of thread `tid`; false when it cannot be duplicated.
bool SocketShape(pid_t tid, int fd, int* family, int* type);

// `tcp 1.2.3.4:5`, `udp [::1]:53`, `unix /run/a.sock`, named as the agent names them (its peer for
// inet; for unix the peer's address if bound, else its own, which is what an accepted server
// socket has).
std::string SocketName(const SocketFacts& facts);

class TargetResolver {
 public:
  // The target of fd `fd` of thread `tid`; false when the fd or thread is gone.
  bool Resolve(pid_t tid, int fd, Target* out);
  // The peer connect(fd, addr, len) of thread `tid` names, read from its memory
  // (`tcp 127.0.0.1:8080`, `unix /run/a.sock`, as the agent names a sys_connect's
  // target); false when it cannot be read or is no address kreplay names.
  bool ResolveConnect(pid_t tid, int fd, uint64_t addr, uint32_t len, Target* out);
  // The socket with inode `inode` is named `target` from now on (a relayed socket, named for the peer the
  // build asked for; a connected one; one whose peer no table kreplay can read will ever give).
  void Remember(uint64_t inode, const Target& target);
  // sockets named from /proc/<tid>/net because pidfd_getfd was denied
  uint64_t peers_from_proc() const { return peers_from_proc_; }

 private:
  bool ResolveSocket(pid_t tid, int fd, uint64_t inode, Target* out);

  // Peers of connected sockets by inode (a connected socket keeps its peer) and the sockets that cannot
  // be named, kinds of paths: each looked up once, bounded.
  std::unordered_map<uint64_t, Target> sockets_;
  std::unordered_map<std::string, TargetKind> path_kinds_;
  uint64_t peers_from_proc_ = 0;
};

}  // namespace kreplay
