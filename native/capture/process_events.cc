#include "process_events.h"

#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

namespace kreplay {

namespace {

// Pids kept for a taker between takes: one that does not take (a capture without the runtime hooks'
// discovery) holds at most this many, then hears of a loss.
constexpr size_t kMaxPending = 1 << 16;

// The initial pid namespace's inode (PROC_PID_INIT_INO): the kernel's tgids are /proc's only there,
// and only when /proc is the agent's own namespace's.
bool InInitialPidNamespace() {
  char target[64];
  const ssize_t n = readlink("/proc/self/ns/pid", target, sizeof(target) - 1);
  char self[32];
  const ssize_t m = readlink("/proc/self", self, sizeof(self) - 1);
  return n > 0 && std::string(target, static_cast<size_t>(n)) == "pid:[4026531836]" && m > 0 &&
         std::string(self, static_cast<size_t>(m)) == std::to_string(getpid());
}

}  // namespace

ProcessEvents::ProcessEvents(int map_fd, uint32_t data_bytes, const volatile __u64* lost)
    : ring_(map_fd, data_bytes), lost_(lost), lost_seen_(*lost), usable_(InInitialPidNamespace()) {}

ProcessEvents::Touched ProcessEvents::Take(Taker taker) {
  std::lock_guard<std::mutex> lock(mutex_);
  ring_.Consume([this](const uint8_t* data, size_t size) {
    if (size < sizeof(__u32)) return;
    __u32 tgid;
    std::memcpy(&tgid, data, sizeof(tgid));
    for (int taker : {kProbes, kHooks}) {
      if (pending_[taker].size() < kMaxPending) {
        pending_[taker].insert(static_cast<pid_t>(tgid));
      } else {
        complete_[taker] = false;
      }
    }
  });
  // a loss counted after this read is heard at the next take, whose walk finds the process
  const __u64 lost = *lost_;
  if (lost != lost_seen_) {
    lost_seen_ = lost;
    complete_[kProbes] = complete_[kHooks] = false;
  }
  Touched out;
  out.pids = std::move(pending_[taker]);
  pending_[taker].clear();
  out.complete = complete_[taker] && usable_;
  out.usable = usable_;
  complete_[taker] = true;
  return out;
}

}  // namespace kreplay
