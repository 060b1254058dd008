// What a supervised call is, read from its seccomp notification: its kind (the
// incident's event type it replays), and for writes the bytes it asks to write
// (read from the build's memory for vectored calls and messages).
#pragma once

#include <linux/seccomp.h>
#include <sys/types.h>

#include <cstdint>

namespace kreplay {

enum class CallKind : int {
  // sys_write: write, writev, pwrite64, pwritev, pwritev2, send, sendto, sendmsg, sendmmsg, sendfile
  kWrite = 0,
  // sys_fsync: fsync, fdatasync, sync_file_range, syncfs
  kFsync = 1,
  // sys_connect
  kConnect = 2,
  // no call: the upstream's response time per exchange on a connection (sys_read's response_ns),
  // which the relay delays (exec_relay.h)
  kResponse = 3,
};
constexpr int kCallKinds = 4;

// The kind of syscall `nr`, false for a call the supervisor passes untouched.
bool ClassifyCall(int nr, CallKind* kind);

// Whether `nr` writes at an offset of its own (pwrite*): never a byte stream.
bool IsPositionalWrite(int nr);

// The bytes write call `data` asks to write, false when the build's memory
// cannot be read (the call is then matched as one call of unknown size).
bool RequestedBytes(pid_t tid, const seccomp_data& data, uint64_t* bytes);

// Reads `len` bytes at `addr` of thread `tid`'s memory; false when it cannot.
bool ReadBuildMemory(pid_t tid, uint64_t addr, void* out, size_t len);

}  // namespace kreplay
