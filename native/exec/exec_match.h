// Which recorded call a build's call takes, in `kreplay replay --exec`: the plan's targets by name
// (exactly, else by a socket's port key), and per target the k-th call, or a stream's bytes [a, b),
// with its hold or release offset and its errno. Plain logic, no kernel and no fds, so that unit
// tests drive it through the addon (execMatch) rather than through a supervised build.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec_call.h"

namespace kreplay {

enum class Pace {
  // matched call k is held holds_ns[k] from the moment it arrives
  kDuration,
  // matched call k proceeds once the session's timeline reaches holds_ns[k]
  kTimeline,
};

// One recorded (kind, target): the names it answers to, and per recorded call,
// in order, its hold (kDuration) or release offset on the timeline (kTimeline).
struct TargetPlan {
  CallKind call = CallKind::kWrite;
  std::vector<std::string> keys;
  std::vector<int64_t> holds_ns;
  // per recorded call, the errno its match fails with without running (0: it runs); empty: none fail
  std::vector<int32_t> errnos;
  // A stream matched by bytes: per recorded call, the stream offset its bytes end at (strictly
  // increasing); the build's bytes [a, b) take the time the incident took to write them. Empty:
  // the build's k-th call matches the incident's k-th.
  std::vector<int64_t> bytes_end;
  // bytes, timeline pace: per recorded call its replayed duration (byte x of call k is released
  // in proportion before the call's release offset)
  std::vector<int64_t> spans_ns;
  // responses: per exchange, the key of the request it answered (request_key.h; 0: not recorded)
  std::vector<uint32_t> request_keys;
  // responses: per exchange, 1 when another of its key took another time (exec-plan.ts): not held
  std::vector<uint8_t> ambiguous;
};

// `<proto> *:<port>` for a socket target with a port (`tcp 10.0.0.5:5432` -> `tcp *:5432`), else
// "": sockets match on the peer port when the address differs. The one builder of the key: the
// plan's keys (cli/exec/target-keys.ts) come from it through the addon.
std::string PortKey(const std::string& socket_target);

// The plan's targets by call kind and name.
class TargetIndex {
 public:
  explicit TargetIndex(const std::vector<TargetPlan>& plan);
  // The plan index of the target a call to `name` goes to, -1 for none.
  int Find(CallKind call, const std::string& name, bool socket) const;

 private:
  std::unordered_map<std::string, int> keys_[kCallKinds];
};

// What the plan says of one call of the build to a planned target.
struct CallMatch {
  // false: it passes untouched (past the recorded calls or bytes, or a stream's call of unknown size)
  bool held = false;
  // duration pace: its hold; timeline pace: its release offset on the timeline
  int64_t release_ns = 0;
  // 0: it runs; else it fails with this errno without running
  int32_t err = 0;
  // a stream: the bytes [from, to) it carried of the recorded ones
  uint64_t from = 0;
  uint64_t to = 0;
};

// The build's calls to one target, in order, against its plan.
class TargetMatcher {
 public:
  // Throws ExecFailure E_EXEC_PLAN for a stream plan whose lists disagree.
  TargetMatcher(const TargetPlan& plan, Pace pace);
  // The build's next call; `sized`: whether its byte count `bytes` is known.
  CallMatch Next(bool sized, uint64_t bytes);

 private:
  // duration pace: the hold of the stream's bytes [a, b); timeline pace: the release offset of byte b
  int64_t BytesHold(uint64_t a, uint64_t b) const;
  // the part of the holds that the stream's first `x` bytes took
  double HoldUpTo(uint64_t x) const;

  const TargetPlan& plan_;
  const Pace pace_;
  uint32_t next_call_ = 0;
  // a stream: the offset the build's next call starts at
  uint64_t next_byte_ = 0;
  // a stream: the holds of the calls before each (duration pace)
  std::vector<double> hold_prefix_;
};

}  // namespace kreplay
