// The supervisor of `kreplay replay --exec`: a thread that receives the
// seccomp notifications of the build's writes, sends, fsyncs and connects,
// resolves each call's target, matches it against the incident's plan
// (exec_match.h: per call, or per byte on streams), holds matched calls on CLOCK_MONOTONIC in a
// deadline queue (never a sleep per call: other calls keep flowing) and then
// continues them (SECCOMP_USER_NOTIF_FLAG_CONTINUE), or fails them with the
// incident's errno without running them (--replay-errors).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "exec_call.h"
#include "exec_match.h"
#include "exec_relay.h"
#include "exec_target.h"

namespace kreplay {

struct TargetResult {
  uint64_t matched = 0;
  // calls past the recorded count (past the recorded bytes on a stream, or of unknown size there)
  uint64_t passed = 0;
  // matched calls failed with the incident's errno
  uint64_t failed = 0;
  // bytes of the matched calls (streams)
  uint64_t bytes = 0;
  // per matched call: from receipt to the answer, and from receipt to the deadline
  // it had when released (-1 when stop or the end released it before its deadline)
  std::vector<int64_t> observed_ns;
  std::vector<int64_t> intended_ns;
  // responses: per matched response, the recorded exchange it took (by its request), in the build's order
  std::vector<uint32_t> exchanges;
  // responses: the recorded exchanges the build's requests took without a hold, since the incident
  // made others it cannot tell them from with other times (ambiguous)
  std::vector<uint32_t> ambiguous;
};

struct UnmatchedTarget {
  std::string name;
  CallKind call;
  TargetKind kind;
  uint64_t calls;
};

struct SupervisorResults {
  std::vector<TargetResult> targets;
  // by kind and name
  std::unordered_map<std::string, UnmatchedTarget> unmatched;
  // calls let through untouched after Bypass()
  uint64_t bypassed = 0;
  // sockets named from /proc/<pid>/net because pidfd_getfd was denied
  uint64_t peers_from_proc = 0;
  // whether the thread got SCHED_FIFO
  bool realtime = false;
  // CLOCK_MONOTONIC when the build made its first call kreplay held (a matched call, or the request
  // of a held response); 0: none
  int64_t first_held_ns = 0;
};

// A file never held whatever the plan says (the stdout and stderr kreplay hands the build),
// by identity: all pipes are one target by name, so a name cannot tell them apart.
struct NeverHeld {
  uint64_t dev;
  uint64_t ino;
  // the name its calls are counted under
  std::string label;
};

class ExecSupervisor {
 public:
  // on_end(code, message) runs on the supervisor thread when it ends: code ""
  // when every supervised process has exited, else the failure's code.
  ExecSupervisor(int listener_fd, Pace pace, std::vector<TargetPlan> plan,
                 std::function<void(const std::string&, const std::string&)> on_end);
  ~ExecSupervisor();

  // Before Start().
  void NeverHold(std::vector<NeverHeld> files) { never_held_ = std::move(files); }
  void Start();
  // Timeline pace: playing from `offset_ns`, or paused there (every matched call waits).
  void SetTimeline(bool playing, int64_t offset_ns);
  // Releases every held call and lets every later call through at once.
  void Bypass();
  // Releases every held call, ends the thread and joins it.
  void Stop();
  // After Stop().
  const SupervisorResults& results() const { return results_; }

 private:
  struct Held {
    int64_t deadline_ns;
    uint64_t id;
    int target;
    uint32_t index;
    int64_t received_ns;
    // 0: continue the call; else fail it with this errno
    int err;
    // timeline pace: its release offset on the timeline
    int64_t release_ns;
    // answered as done (0) without running: a connect the relay made in the build's stead
    bool emulated;
  };
  struct Command {
    enum { kTimeline, kBypass } type;
    bool playing;
    int64_t offset_ns;
  };
  // What the notification and /proc say of a call, before it is matched.
  struct Call {
    CallKind kind;
    // false: its fd (or a connect's address) could not be named
    bool resolved;
    Target target;
    // a write's byte count, when the build's memory could be read
    bool sized;
    uint64_t bytes;
    // a file kreplay handed the build (target.name is then its label)
    bool never_held;
  };

  void Run();
  void Receive();
  // The call of `notif` resolved; false when it is no longer pending (its answer is then no one's to give).
  bool Resolve(const seccomp_notif& notif, CallKind kind, Call* call);
  // A call to no planned target passes; counted under its name.
  void CountUnmatched(const Call& call);
  void Continue(uint64_t id);
  // err 0: continue the call; else fail it with err; emulated: it returns 0 without running
  void Answer(uint64_t id, int err, bool emulated = false);
  // A connect through the relay: true when it took the call (answered it, or holds it in held_).
  bool ConnectThroughRelay(const seccomp_notif& notif, const Target& target, int response, Held* held);
  void Hold(const Held& held);
  void MergeRelayTimings();
  void Release(const Held& held, bool early = false);
  void ReleaseDue(int64_t now);
  void ReleaseAll();
  // Whether the build's calls and kreplay's answers hand the CPU over directly (on the caller's CPU);
  // off while held calls are released (see ReleaseDue).
  void HandOver(bool direct);
  void ApplyCommands();
  // CLOCK_MONOTONIC when a call received at `received_ns` is due: its hold after it (duration pace), or
  // its release offset on the timeline (never while paused)
  int64_t Deadline(int64_t received_ns, int64_t release_ns) const;
  int64_t TimelineDeadline(int64_t release_offset_ns) const;
  const NeverHeld* NeverHeldFile(pid_t tid, int fd) const;

  const int listener_fd_;
  const int wake_fd_;
  const Pace pace_;
  const std::vector<TargetPlan> plan_;
  const TargetIndex index_;
  std::vector<NeverHeld> never_held_;
  std::function<void(const std::string&, const std::string&)> on_end_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex commands_mutex_;
  std::vector<Command> commands_;

  // Touched by the thread only, until it has been joined.
  TargetResolver resolver_;
  // made when the plan has responses to delay (or connects a non-blocking build waits on)
  std::unique_ptr<ExecRelay> relay_;
  // per target: which recorded call the build's next call takes
  std::vector<TargetMatcher> matchers_;
  std::vector<Held> held_;  // a min-heap on deadline_ns
  bool bypass_ = false;
  // whether the kernel took SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6)
  bool hand_over_ = false;
  bool timeline_playing_ = false;
  int64_t timeline_anchor_ns_ = 0;  // while playing: offset = now - anchor
  int64_t timeline_offset_ns_ = 0;  // while paused
  SupervisorResults results_;
};

}  // namespace kreplay
