#include "exec_supervisor.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "capture_error.h"
#include "exec_error.h"
#include "thread_scheduling.h"

// Linux 6.6: the caller and the supervisor hand the CPU to each other directly
// (no wake-up through the scheduler's queues), for headers that predate it.
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

namespace kreplay {

namespace {

// The thread wakes a margin before a deadline and spins the rest, since a
// sleeping thread wakes late (tens of µs on a virtual machine, even under
// SCHED_FIFO; more under load). The margin follows the overshoots it sees, as
// the daemon's replay clock does: up at once, down slowly, 1.5× the decaying
// maximum, within bounds (spinning longer would keep a core from the build).
constexpr int64_t kInitialMarginNs = 250'000;
constexpr int64_t kMinMarginNs = 30'000;
constexpr int64_t kMaxMarginNs = 2'000'000;
constexpr int64_t kNever = INT64_MAX;
constexpr int kRealtimePriority = 10;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// heap order: the earliest deadline on top
constexpr auto kLater = [](const auto& a, const auto& b) { return a.deadline_ns > b.deadline_ns; };

bool IsWrite(int nr) {
  return nr == __NR_write || nr == __NR_writev || nr == __NR_pwrite64 || nr == __NR_pwritev || nr == __NR_pwritev2;
}

}  // namespace

ExecFailure ExecSystemFailure(const char* code, const std::string& what, int err) {
  return ExecFailure(code, what + ": " + strerror(err));
}

ExecSupervisor::ExecSupervisor(int listener_fd, Pace pace, std::vector<TargetPlan> plan,
                               std::function<void(const std::string&, const std::string&)> on_end)
    : listener_fd_(listener_fd),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      pace_(pace),
      plan_(std::move(plan)),
      on_end_(std::move(on_end)) {
  if (wake_fd_ < 0) throw ExecSystemFailure("E_SECCOMP", "cannot make an eventfd", errno);
  // exact names first: a port key never shadows another target's exact name
  for (size_t i = 0; i < plan_.size(); i++) keys_.emplace(plan_[i].keys.at(0), static_cast<int>(i));
  for (size_t i = 0; i < plan_.size(); i++)
    for (const std::string& key : plan_[i].keys) keys_.emplace(key, static_cast<int>(i));
  next_call_.assign(plan_.size(), 0);
  results_.targets.resize(plan_.size());
  for (size_t i = 0; i < plan_.size(); i++) {
    results_.targets[i].observed_ns.assign(plan_[i].holds_ns.size(), -1);
    results_.targets[i].intended_ns.assign(plan_[i].holds_ns.size(), -1);
  }
}

ExecSupervisor::~ExecSupervisor() {
  Stop();
  close(wake_fd_);
  close(listener_fd_);
}

void ExecSupervisor::Start() { thread_ = std::thread(&ExecSupervisor::Run, this); }

void ExecSupervisor::SetTimeline(bool playing, int64_t offset_ns) {
  {
    std::lock_guard<std::mutex> lock(commands_mutex_);
    commands_.push_back({Command::kTimeline, playing, offset_ns});
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void ExecSupervisor::Bypass() {
  {
    std::lock_guard<std::mutex> lock(commands_mutex_);
    commands_.push_back({Command::kBypass, false, 0});
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void ExecSupervisor::Stop() {
  stopping_ = true;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

void ExecSupervisor::Run() {
  // held calls are due to the microsecond: no timer slack, and real-time priority when allowed
  prctl(PR_SET_TIMERSLACK, 1UL);
  // older kernels lack it: calls then wake through the scheduler, a little slower
  ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
  try {
    SetRealtimeScheduling(static_cast<pid_t>(syscall(SYS_gettid)), kRealtimePriority);
    results_.realtime = true;
  } catch (const SchedulingFailure&) {
    // without CAP_SYS_NICE the margin grows to what the wake-ups need
  }
  int64_t margin_ns = kInitialMarginNs;
  int64_t overshoot_ns = 0;
  std::string code, message;
  pollfd fds[2] = {{listener_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  try {
    while (!stopping_) {
      int64_t now = NowNs();
      ReleaseDue(now);
      const int64_t next = held_.empty() ? kNever : held_.front().deadline_ns;
      // close to a deadline: spin to it, polling without blocking so that other threads' calls are
      // still taken (and held or passed) while one waits
      const bool spinning = next != kNever && next - now <= margin_ns;
      timespec wait{};
      if (next != kNever && !spinning) {
        const int64_t ns = next - now - margin_ns;
        wait = {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      }
      const int ready = ppoll(fds, 2, next == kNever ? nullptr : &wait, nullptr);
      if (ready < 0) {
        if (errno == EINTR) continue;
        throw ExecSystemFailure("E_SECCOMP", "ppoll on the seccomp listener", errno);
      }
      if (ready == 0 && !spinning) {
        // woke for a deadline: how late against the planned wake-up
        const int64_t over = std::max<int64_t>(NowNs() - (next - margin_ns), 0);
        overshoot_ns = over > overshoot_ns ? over : overshoot_ns - (overshoot_ns - over) / 32;
        margin_ns = std::clamp<int64_t>(overshoot_ns * 3 / 2, kMinMarginNs, kMaxMarginNs);
      }
      if (fds[1].revents & POLLIN) {
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof count);
        ApplyCommands();
      }
      if (fds[0].revents & POLLIN) {
        Receive();
      } else if (fds[0].revents & (POLLHUP | POLLERR)) {
        // every process under the filter has exited
        break;
      }
    }
  } catch (const ExecFailure& failure) {
    code = failure.code();
    message = failure.what();
  }
  ReleaseAll();
  results_.peers_from_proc = resolver_.peers_from_proc();
  on_end_(code, message);
}

void ExecSupervisor::ApplyCommands() {
  std::vector<Command> commands;
  {
    std::lock_guard<std::mutex> lock(commands_mutex_);
    commands.swap(commands_);
  }
  for (const Command& command : commands) {
    if (command.type == Command::kBypass) {
      bypass_ = true;
      ReleaseAll();
      continue;
    }
    timeline_playing_ = command.playing;
    timeline_offset_ns_ = command.offset_ns;
    timeline_anchor_ns_ = NowNs() - command.offset_ns;
  }
  if (pace_ != Pace::kTimeline || commands.empty()) return;
  for (Held& held : held_) held.deadline_ns = TimelineDeadline(plan_[held.target].holds_ns[held.index]);
  std::make_heap(held_.begin(), held_.end(), kLater);
}

int64_t ExecSupervisor::TimelineDeadline(int64_t release_offset_ns) const {
  return timeline_playing_ ? timeline_anchor_ns_ + release_offset_ns : kNever;
}

const NeverHeld* ExecSupervisor::NeverHeldFile(pid_t tid, int fd) const {
  if (never_held_.empty()) return nullptr;
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/%d/fd/%d", static_cast<int>(tid), fd);
  struct stat st {};
  if (stat(proc, &st) != 0) return nullptr;
  for (const NeverHeld& file : never_held_)
    if (file.dev == st.st_dev && file.ino == st.st_ino) return &file;
  return nullptr;
}

int ExecSupervisor::Lookup(const Target& target) const {
  auto exact = keys_.find(target.name);
  if (exact != keys_.end()) return exact->second;
  if (target.kind != TargetKind::kSocket) return -1;
  const std::string port = PortKey(target.name);
  auto by_port = port.empty() ? keys_.end() : keys_.find(port);
  return by_port == keys_.end() ? -1 : by_port->second;
}

void ExecSupervisor::Receive() {
  seccomp_notif notif;
  memset(&notif, 0, sizeof notif);
  if (ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_RECV, &notif) != 0) {
    // ENOENT: the caller died (or was signalled) before we took its call
    if (errno == ENOENT || errno == EINTR) return;
    throw ExecSystemFailure("E_SECCOMP", "SECCOMP_IOCTL_NOTIF_RECV", errno);
  }
  const int64_t received = NowNs();
  if (bypass_ || !IsWrite(notif.data.nr)) {
    if (bypass_) results_.bypassed++;
    Continue(notif.id);
    return;
  }
  Target target;
  const bool resolved = resolver_.Resolve(static_cast<pid_t>(notif.pid), static_cast<int>(notif.data.args[0]), &target);
  // what /proc showed belongs to this call only if the call is still pending (the tid may be reused)
  if (ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_ID_VALID, &notif.id) != 0) return;
  const NeverHeld* never = resolved ? NeverHeldFile(static_cast<pid_t>(notif.pid), static_cast<int>(notif.data.args[0])) : nullptr;
  if (never) target.name = never->label;
  const int index = resolved && !never ? Lookup(target) : -1;
  if (index < 0) {
    // a bad fd fails in the call itself; counted under the name the link had
    if (!resolved) target = {"(closed fd)", TargetKind::kOther};
    auto [entry, fresh] = results_.unmatched.try_emplace(target.name, UnmatchedTarget{target.kind, 0});
    entry->second.calls++;
    Continue(notif.id);
    return;
  }
  const uint32_t call = next_call_[index]++;
  TargetResult& result = results_.targets[index];
  const std::vector<int64_t>& holds = plan_[index].holds_ns;
  if (call >= holds.size()) {
    result.passed++;
    Continue(notif.id);
    return;
  }
  result.matched++;
  const Held held{pace_ == Pace::kDuration ? received + holds[call] : TimelineDeadline(holds[call]), notif.id, index,
                  call, received};
  if (held.deadline_ns <= received) {
    Release(held);
    return;
  }
  held_.push_back(held);
  std::push_heap(held_.begin(), held_.end(), kLater);
}

void ExecSupervisor::Continue(uint64_t id) {
  seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = id;
  resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  // ENOENT: the caller was killed while held; nothing to answer
  if (ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno != ENOENT && errno != EINTR)
    throw ExecSystemFailure("E_SECCOMP", "SECCOMP_IOCTL_NOTIF_SEND", errno);
}

void ExecSupervisor::Release(const Held& held, bool early) {
  Continue(held.id);
  TargetResult& result = results_.targets[held.target];
  result.observed_ns[held.index] = NowNs() - held.received_ns;
  if (!early) result.intended_ns[held.index] = std::max<int64_t>(held.deadline_ns - held.received_ns, 0);
}

void ExecSupervisor::ReleaseDue(int64_t now) {
  while (!held_.empty() && held_.front().deadline_ns <= now) {
    std::pop_heap(held_.begin(), held_.end(), kLater);
    const Held held = held_.back();
    held_.pop_back();
    Release(held);
  }
}

void ExecSupervisor::ReleaseAll() {
  for (const Held& held : held_) {
    try {
      Release(held, true);
    } catch (const ExecFailure&) {
      // ending anyway: the rest still go
    }
  }
  held_.clear();
}

}  // namespace kreplay
