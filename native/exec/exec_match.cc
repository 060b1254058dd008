#include "exec_match.h"

#include <algorithm>
#include <cmath>

#include "exec_error.h"

namespace kreplay {

std::string PortKey(const std::string& socket_target) {
  // the last space: an accepted connection keeps its word (`tcp accepted *:8080`)
  const size_t space = socket_target.rfind(' ');
  const size_t colon = socket_target.rfind(':');
  if (space == std::string::npos || colon == std::string::npos || colon < space) return "";
  if (socket_target.rfind("unix", 0) == 0) return "";
  return socket_target.substr(0, space) + " *:" + socket_target.substr(colon + 1);
}

TargetIndex::TargetIndex(const std::vector<TargetPlan>& plan) {
  // exact names first: a port key never shadows another target's exact name
  for (size_t i = 0; i < plan.size(); i++)
    keys_[static_cast<int>(plan[i].call)].emplace(plan[i].keys.at(0), static_cast<int>(i));
  for (size_t i = 0; i < plan.size(); i++)
    for (const std::string& key : plan[i].keys) keys_[static_cast<int>(plan[i].call)].emplace(key, static_cast<int>(i));
}

int TargetIndex::Find(CallKind call, const std::string& name, bool socket) const {
  const auto& keys = keys_[static_cast<int>(call)];
  auto exact = keys.find(name);
  if (exact != keys.end()) return exact->second;
  if (!socket) return -1;
  const std::string port = PortKey(name);
  auto by_port = port.empty() ? keys.end() : keys.find(port);
  return by_port == keys.end() ? -1 : by_port->second;
}

TargetMatcher::TargetMatcher(const TargetPlan& plan, Pace pace) : plan_(plan), pace_(pace) {
  if (plan.bytes_end.empty()) return;
  if (plan.bytes_end.size() != plan.holds_ns.size() ||
      (pace == Pace::kTimeline && plan.spans_ns.size() != plan.holds_ns.size()))
    throw ExecFailure("E_EXEC_PLAN", "a stream's byte ends and holds differ in count");
  for (size_t k = 0; k < plan.bytes_end.size(); k++)
    if (plan.bytes_end[k] <= (k == 0 ? 0 : plan.bytes_end[k - 1]))
      throw ExecFailure("E_EXEC_PLAN", "a stream's byte ends must increase");
  hold_prefix_.assign(1, 0.0);
  for (int64_t hold : plan.holds_ns) hold_prefix_.push_back(hold_prefix_.back() + static_cast<double>(hold));
}

CallMatch TargetMatcher::Next(bool sized, uint64_t bytes) {
  CallMatch match;
  const uint32_t k = next_call_++;
  if (plan_.bytes_end.empty()) {
    if (k >= plan_.holds_ns.size()) return match;
    match.held = true;
    match.release_ns = plan_.holds_ns[k];
    if (k < plan_.errnos.size()) match.err = plan_.errnos[k];
    return match;
  }
  // a stream: the build's bytes [a, b) take what the incident's took; past them, or unsized, a call passes
  const uint64_t a = next_byte_;
  const uint64_t total = static_cast<uint64_t>(plan_.bytes_end.back());
  if (!sized || a >= total) return match;
  const uint64_t b = std::min(a + bytes, total);
  next_byte_ = b;
  match.held = true;
  match.release_ns = BytesHold(a, b);
  match.from = a;
  match.to = b;
  return match;
}

double TargetMatcher::HoldUpTo(uint64_t x) const {
  const std::vector<int64_t>& ends = plan_.bytes_end;
  const auto at = std::lower_bound(ends.begin(), ends.end(), static_cast<int64_t>(x));
  if (at == ends.end()) return hold_prefix_.back();
  const size_t k = static_cast<size_t>(at - ends.begin());
  const double start = k == 0 ? 0.0 : static_cast<double>(ends[k - 1]);
  const double share = (static_cast<double>(x) - start) / (static_cast<double>(ends[k]) - start);
  return hold_prefix_[k] + share * static_cast<double>(plan_.holds_ns[k]);
}

int64_t TargetMatcher::BytesHold(uint64_t a, uint64_t b) const {
  if (pace_ == Pace::kDuration) return std::llround(HoldUpTo(b) - HoldUpTo(a));
  // timeline: byte b is written when the recorded call holding it had written its share of it
  const std::vector<int64_t>& ends = plan_.bytes_end;
  const size_t k =
      static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), static_cast<int64_t>(b)) - ends.begin());
  const double start = k == 0 ? 0.0 : static_cast<double>(ends[k - 1]);
  const double left = (static_cast<double>(ends[k]) - static_cast<double>(b)) / (static_cast<double>(ends[k]) - start);
  return plan_.holds_ns[k] - std::llround(left * static_cast<double>(plan_.spans_ns[k]));
}

}  // namespace kreplay
