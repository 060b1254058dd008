#include "exec_supervisor.h"

#include <errno.h>
#include <fcntl.h>
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
      index_(plan_),
      on_end_(std::move(on_end)) {
  if (wake_fd_ < 0) throw ExecSystemFailure("E_SECCOMP", "cannot make an eventfd", errno);
  matchers_.reserve(plan_.size());
  for (const TargetPlan& target : plan_) matchers_.emplace_back(target, pace_);
  results_.targets.resize(plan_.size());
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
  hand_over_ = ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) == 0;
  int64_t max_margin_ns = kMaxMarginNs;
  try {
    SetRealtimeScheduling(static_cast<pid_t>(syscall(SYS_gettid)), kRealtimePriority);
    results_.realtime = true;
  } catch (const SchedulingFailure&) {
    // Without CAP_SYS_NICE: a short slice, so that a deadline's wake-up preempts a busy neighbour, and
    // a spin no longer than that slice. A fair-scheduled thread that spins longer uses up its share
    // and then waits out its neighbours' slices, late by milliseconds on a loaded machine.
    if (SetShortestSlice(static_cast<pid_t>(syscall(SYS_gettid)))) max_margin_ns = kShortestSliceNs;
  }
  int64_t margin_ns = std::min(kInitialMarginNs, max_margin_ns);
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
        margin_ns = std::clamp<int64_t>(overshoot_ns * 3 / 2, kMinMarginNs, max_margin_ns);
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
  if (relay_) {
    relay_->Stop();
    MergeRelayTimings();
    const int64_t relayed = relay_->first_held_ns();
    if (relayed != 0 && (results_.first_held_ns == 0 || relayed < results_.first_held_ns))
      results_.first_held_ns = relayed;
  }
  on_end_(code, message);
}

void ExecSupervisor::MergeRelayTimings() {
  for (const RelayTiming& timing : relay_->timings()) {
    TargetResult& result = results_.targets[timing.target];
    if (plan_[timing.target].call == CallKind::kResponse && timing.index == kNoExchange) {
      result.passed++;
    } else if (timing.ambiguous) {
      // the build made it, so it counts as made; it was not held, so it has no timing
      result.matched++;
      result.ambiguous.push_back(timing.index);
    } else if (plan_[timing.target].call == CallKind::kResponse) {
      // one per exchange the build's responses took, in the order the relay saw them
      result.matched++;
      result.observed_ns.push_back(timing.observed_ns);
      result.intended_ns.push_back(timing.intended_ns);
      result.exchanges.push_back(timing.index);
    } else if (timing.index < result.observed_ns.size()) {
      result.observed_ns[timing.index] = timing.observed_ns;
    }
  }
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
  for (Held& held : held_) held.deadline_ns = TimelineDeadline(held.release_ns);
  std::make_heap(held_.begin(), held_.end(), kLater);
}

int64_t ExecSupervisor::Deadline(int64_t received_ns, int64_t release_ns) const {
  return pace_ == Pace::kDuration ? received_ns + release_ns : TimelineDeadline(release_ns);
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

void ExecSupervisor::Receive() {
  seccomp_notif notif;
  memset(&notif, 0, sizeof notif);
  if (ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_RECV, &notif) != 0) {
    // ENOENT: the caller died (or was signalled) before we took its call
    if (errno == ENOENT || errno == EINTR) return;
    throw ExecSystemFailure("E_SECCOMP", "SECCOMP_IOCTL_NOTIF_RECV", errno);
  }
  const int64_t received = NowNs();
  CallKind kind;
  if (bypass_ || !ClassifyCall(notif.data.nr, &kind)) {
    if (bypass_) results_.bypassed++;
    Continue(notif.id);
    return;
  }
  Call call;
  if (!Resolve(notif, kind, &call)) return;
  const bool socket = call.target.kind == TargetKind::kSocket;
  const int index = call.resolved && !call.never_held ? index_.Find(kind, call.target.name, socket) : -1;
  const int response =
      call.resolved && kind == CallKind::kConnect ? index_.Find(CallKind::kResponse, call.target.name, socket) : -1;
  if (index < 0 && response >= 0) {
    // a peer with responses to delay and no recorded connect: its connect goes through the relay at once
    Held held{received, notif.id, -1, 0, received, 0, 0, false};
    if (!ConnectThroughRelay(notif, call.target, response, &held)) Continue(notif.id);
    return;
  }
  if (index < 0) {
    CountUnmatched(call);
    Continue(notif.id);
    return;
  }
  const CallMatch match = matchers_[index].Next(call.sized, call.bytes);
  TargetResult& result = results_.targets[index];
  if (!match.held) {
    result.passed++;
    // a connection beyond the recorded ones (a health probe's, a warm-up's) to a peer with responses
    // to delay still goes through the relay, un-held: its requests are matched by what they ask
    Held relayed{received, notif.id, -1, 0, received, 0, 0, false};
    if (kind != CallKind::kConnect || response < 0 || !ConnectThroughRelay(notif, call.target, response, &relayed))
      Continue(notif.id);
    return;
  }
  result.matched++;
  result.bytes += match.to - match.from;
  Held held{0,         notif.id,         index, static_cast<uint32_t>(result.observed_ns.size()), received,
            match.err, match.release_ns, false};
  result.observed_ns.push_back(-1);
  result.intended_ns.push_back(-1);
  held.deadline_ns = Deadline(received, held.release_ns);
  if (kind == CallKind::kConnect && held.err == 0 && ConnectThroughRelay(notif, call.target, response, &held)) return;
  Hold(held);
}

bool ExecSupervisor::Resolve(const seccomp_notif& notif, CallKind kind, Call* call) {
  const pid_t tid = static_cast<pid_t>(notif.pid);
  const int fd = static_cast<int>(notif.data.args[0]);
  call->kind = kind;
  call->resolved = kind == CallKind::kConnect
                       ? resolver_.ResolveConnect(tid, fd, notif.data.args[1],
                                                  static_cast<uint32_t>(notif.data.args[2]), &call->target)
                       : resolver_.Resolve(tid, fd, &call->target);
  call->bytes = 0;
  call->sized = kind == CallKind::kWrite && RequestedBytes(tid, notif.data, &call->bytes);
  // what /proc and the build's memory showed belong to this call only if it is still pending (the tid may be reused)
  if (ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_ID_VALID, &notif.id) != 0) return false;
  const NeverHeld* never = call->resolved && kind != CallKind::kConnect ? NeverHeldFile(tid, fd) : nullptr;
  call->never_held = never != nullptr;
  if (never) call->target.name = never->label;
  return true;
}

void ExecSupervisor::CountUnmatched(const Call& call) {
  // a bad fd fails in the call itself; counted under the name the link had
  const Target target =
      call.resolved ? call.target
                    : Target{call.kind == CallKind::kConnect ? "(no address)" : "(closed fd)", TargetKind::kOther};
  const std::string key = std::to_string(static_cast<int>(call.kind)) + "\t" + target.name;
  auto [entry, fresh] = results_.unmatched.try_emplace(key, UnmatchedTarget{target.name, call.kind, target.kind, 0});
  entry->second.calls++;
}

void ExecSupervisor::Hold(const Held& held) {
  if (held.target >= 0 && results_.first_held_ns == 0) results_.first_held_ns = held.received_ns;
  if (held.deadline_ns <= held.received_ns) {
    Release(held);
    return;
  }
  held_.push_back(held);
  std::push_heap(held_.begin(), held_.end(), kLater);
}

bool ExecSupervisor::ConnectThroughRelay(const seccomp_notif& notif, const Target& target, int response, Held* held) {
  const pid_t tid = static_cast<pid_t>(notif.pid);
  const int fd = static_cast<int>(notif.data.args[0]);
  const int64_t hold = held->deadline_ns - held->received_ns;
  bool nonblocking = false, cloexec = false;
  if (!FdFlags(tid, fd, &nonblocking, &cloexec)) return false;
  // the relay serves a peer with responses to delay, or a connect a non-blocking build waits on in poll/epoll
  // (a time to complete it at: none while a timeline session is paused)
  if (response < 0 && !(nonblocking && hold > 0 && held->deadline_ns != kNever)) return false;
  sockaddr_storage peer{};
  const socklen_t len = static_cast<socklen_t>(std::min<uint64_t>(notif.data.args[2], sizeof peer));
  if (!ReadBuildMemory(tid, notif.data.args[1], &peer, len)) return false;
  if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) return false;
  int family = 0, type = 0;
  if (!SocketShape(tid, fd, &family, &type) || type != SOCK_STREAM) return false;
  if (!relay_) {
    std::vector<ResponsePlan> responses(plan_.size());
    for (size_t i = 0; i < plan_.size(); i++)
      if (plan_[i].call == CallKind::kResponse)
        responses[i] = {plan_[i].holds_ns, plan_[i].request_keys, plan_[i].ambiguous};
    relay_ = std::make_unique<ExecRelay>(std::move(responses));
  }
  int err = 0;
  // completed by the relay at its deadline: on the timeline, where the session stands now (a later
  // pause or seek does not move a connect already in progress); at once while it is paused
  const bool timed = nonblocking && held->deadline_ns != kNever;
  const int c = relay_->Open(peer, len, family, nonblocking, response, held->received_ns, timed ? held->deadline_ns : 0,
                             timed ? held->target : -1, held->index, &err);
  if (c < 0) {
    // the real peer refused (or never answered): the build's connect fails so, after its hold
    held->err = err;
    Hold(*held);
    return true;
  }
  seccomp_notif_addfd addfd{};
  addfd.id = notif.id;
  addfd.flags = SECCOMP_ADDFD_FLAG_SETFD;
  addfd.srcfd = static_cast<uint32_t>(c);
  addfd.newfd = static_cast<uint32_t>(fd);
  addfd.newfd_flags = cloexec ? O_CLOEXEC : 0;
  const int installed = ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_ADDFD, &addfd);
  // the build's later sends on it match the peer it asked for, not the relay
  struct stat st {};
  if (installed >= 0 && fstat(c, &st) == 0) resolver_.Remember(st.st_ino, target);
  close(c);
  if (installed < 0) {
    // the caller is gone (ENOENT), or its fd table refused it: it connects itself
    if (errno == ENOENT) return true;
    return false;
  }
  if (nonblocking) {
    // in progress, as the kernel says of a non-blocking connect: the relay completes it at its time
    if (timed && held->target >= 0)
      results_.targets[held->target].intended_ns[held->index] = std::max<int64_t>(hold, 0);
    Answer(notif.id, EINPROGRESS);
    return true;
  }
  held->emulated = true;
  Hold(*held);
  return true;
}

void ExecSupervisor::Continue(uint64_t id) { Answer(id, 0); }

void ExecSupervisor::Answer(uint64_t id, int err, bool emulated) {
  seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = id;
  if (err != 0) {
    resp.error = -err;
  } else if (!emulated) {
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  }
  // ENOENT: the caller was killed while held; nothing to answer
  if (ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno != ENOENT && errno != EINTR)
    throw ExecSystemFailure("E_SECCOMP", "SECCOMP_IOCTL_NOTIF_SEND", errno);
}

void ExecSupervisor::Release(const Held& held, bool early) {
  // a call stop or the end cut short runs: the build is let go, not failed
  Answer(held.id, early ? 0 : held.err, held.emulated);
  if (held.target < 0) return;
  TargetResult& result = results_.targets[held.target];
  if (!early && held.err != 0) result.failed++;
  result.observed_ns[held.index] = NowNs() - held.received_ns;
  if (!early) result.intended_ns[held.index] = std::max<int64_t>(held.deadline_ns - held.received_ns, 0);
}

void ExecSupervisor::HandOver(bool direct) {
  if (hand_over_) ioctl(listener_fd_, SECCOMP_IOCTL_NOTIF_SET_FLAGS, direct ? SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP : 0UL);
}

void ExecSupervisor::ReleaseDue(int64_t now) {
  if (held_.empty() || held_.front().deadline_ns > now) return;
  // A call released after its hold wakes the build as a timer wakes a sleeping thread: on the CPU the
  // scheduler picks, an idle one if there is one. Handed over directly, it would wake on this thread's
  // CPU, which the spin to the deadline kept from everything else, and wait there for a busy
  // neighbour's turn: late by a time slice or more on a loaded machine (issue 48). A call answered at
  // once is still handed back directly: the build's thread was on this CPU a moment ago.
  HandOver(false);
  while (!held_.empty() && held_.front().deadline_ns <= now) {
    std::pop_heap(held_.begin(), held_.end(), kLater);
    const Held held = held_.back();
    held_.pop_back();
    Release(held);
  }
  HandOver(true);
}

void ExecSupervisor::ReleaseAll() {
  HandOver(false);
  for (const Held& held : held_) {
    try {
      Release(held, true);
    } catch (const ExecFailure&) {
      // ending anyway: the rest still go
    }
  }
  held_.clear();
  HandOver(true);
}

}  // namespace kreplay
