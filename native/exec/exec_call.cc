#include "exec_call.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <vector>

namespace kreplay {

namespace {

// Vectors longer than this are not summed (the kernel's own limit, UIO_MAXIOV).
constexpr uint64_t kMaxIov = 1024;
// sendmmsg messages read per call (the kernel's own limit, UIO_MAXIOV).
constexpr uint64_t kMaxMessages = 1024;

bool SumIovec(pid_t tid, uint64_t iov, uint64_t count, uint64_t* bytes) {
  if (count > kMaxIov) return false;
  std::vector<iovec> vec(count);
  if (count > 0 && !ReadBuildMemory(tid, iov, vec.data(), count * sizeof(iovec))) return false;
  uint64_t sum = 0;
  for (const iovec& v : vec) sum += v.iov_len;
  *bytes = sum;
  return true;
}

bool MessageBytes(pid_t tid, uint64_t msg, uint64_t* bytes) {
  msghdr header{};
  if (!ReadBuildMemory(tid, msg, &header, sizeof header)) return false;
  return SumIovec(tid, reinterpret_cast<uint64_t>(header.msg_iov), header.msg_iovlen, bytes);
}

}  // namespace

bool ReadBuildMemory(pid_t tid, uint64_t addr, void* out, size_t len) {
  iovec local{out, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  return process_vm_readv(tid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(len);
}

bool ClassifyCall(int nr, CallKind* kind) {
  switch (nr) {
    case __NR_write:
    case __NR_writev:
    case __NR_pwrite64:
    case __NR_pwritev:
    case __NR_pwritev2:
    case __NR_sendto:
    case __NR_sendmsg:
    case __NR_sendmmsg:
    case __NR_sendfile:
      *kind = CallKind::kWrite;
      return true;
    case __NR_fsync:
    case __NR_fdatasync:
    case __NR_sync_file_range:
    case __NR_syncfs:
      *kind = CallKind::kFsync;
      return true;
    case __NR_connect:
      *kind = CallKind::kConnect;
      return true;
    default:
      return false;
  }
}

bool IsPositionalWrite(int nr) { return nr == __NR_pwrite64 || nr == __NR_pwritev || nr == __NR_pwritev2; }

bool RequestedBytes(pid_t tid, const seccomp_data& data, uint64_t* bytes) {
  switch (data.nr) {
    case __NR_write:
    case __NR_pwrite64:
    case __NR_sendto:  // send(2) is sendto on x86_64 and arm64
      *bytes = data.args[2];
      return true;
    case __NR_sendfile:
      *bytes = data.args[3];
      return true;
    case __NR_writev:
    case __NR_pwritev:
    case __NR_pwritev2:
      return SumIovec(tid, data.args[1], data.args[2], bytes);
    case __NR_sendmsg:
      return MessageBytes(tid, data.args[1], bytes);
    case __NR_sendmmsg: {
      const uint64_t count = data.args[2];
      if (count > kMaxMessages) return false;
      uint64_t sum = 0;
      for (uint64_t i = 0; i < count; i++) {
        uint64_t one = 0;
        if (!MessageBytes(tid, data.args[1] + i * sizeof(mmsghdr), &one)) return false;
        sum += one;
      }
      *bytes = sum;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace kreplay
