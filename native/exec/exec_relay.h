// kreplay's loopback relay for `kreplay replay --exec`: the build's connect to a
// peer is answered with a socket to the relay (SECCOMP_IOCTL_NOTIF_ADDFD), which
// forwards to the real peer and holds each response back until the incident's
// response time for that exchange has passed since the build's request: the
// build's kernel then sees the upstream as slow as production saw it, whatever
// the build waits in (recv, poll, select, epoll). A non-blocking connect is made
// to complete only at the incident's connect time: the handed socket is kept
// unwritable until then (its send queue stuffed against a closed window, with
// TCP_NOTSENT_LOWAT), which is what the build's poll or epoll waits for.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kreplay {

// A relayed connection's timing, measured by the relay for the report.
struct RelayTiming {
  // plan index of the response or connect target, and the result slot it fills (a response: the
  // recorded exchange it took, or kNoExchange for a request the incident never made)
  int target;
  uint32_t index;
  // -1: the build closed the connection before the held response was released
  int64_t observed_ns;
  int64_t intended_ns;
  // a response whose request the incident made among others it cannot be told from: not held
  bool ambiguous;
};

constexpr uint32_t kNoExchange = UINT32_MAX;

// A peer's recorded exchanges: per exchange its response hold, the key of its request (0: not
// recorded), and whether other exchanges of that key took other times (then none is held).
struct ResponsePlan {
  std::vector<int64_t> holds_ns;
  std::vector<uint32_t> request_keys;
  std::vector<uint8_t> ambiguous;
};

// The exchange a response to a request of `key` answers: the first unused one of the same key, else the
// first unused one whose request was not recorded (matched by order); kNoExchange when none is left.
uint32_t PickExchange(const ResponsePlan& plan, const std::vector<bool>& used, uint32_t key);

class ExecRelay {
 public:
  // response_holds: per plan index, its response hold per exchange (empty for other targets)
  explicit ExecRelay(std::vector<ResponsePlan> responses);
  ~ExecRelay();

  // Connects to `peer` (up to a few seconds) and returns the socket to hand to
  // the build in its stead, -1 with *err set to the connect's errno. family: the
  // build socket's; nonblocking: its O_NONBLOCK. `response_target`: plan index
  // whose holds delay the responses (-1: none). open_at_ns (CLOCK_MONOTONIC, 0:
  // now): a non-blocking build's connect completes then; `connect_target` and
  // `connect_index` name the result the relay fills when it does (the time since
  // `received_ns`, when the supervisor took the call).
  int Open(const sockaddr_storage& peer, socklen_t peer_len, int family, bool nonblocking, int response_target,
           int64_t received_ns, int64_t open_at_ns, int connect_target, uint32_t connect_index, int* err);
  // Ends the thread and every link; then timings() holds what it measured.
  void Stop();
  const std::vector<RelayTiming>& timings() const { return timings_; }
  // CLOCK_MONOTONIC of the build's first request whose response was held; 0: none
  int64_t first_held_ns() const { return first_held_ns_; }

 private:
  struct Link;
  void Run();
  void Adopt();
  void Process(Link* link, int64_t now);
  void Update(Link* link);
  void Close(Link* link);
  static size_t Releasable(const Link* link, int64_t now, int64_t* next);
  int Listener(bool stuffing);

  std::vector<ResponsePlan> responses_;
  // one plain listener, one with a minimal receive buffer for stuffed (delayed) connects
  int listeners_[2] = {-1, -1};
  uint16_t ports_[2] = {0, 0};
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex adopt_mutex_;
  std::vector<Link*> adopt_;

  // the relay thread's
  std::unordered_map<Link*, bool> links_;
  // per response target, the exchanges taken
  std::vector<std::vector<bool>> used_;
  std::vector<RelayTiming> timings_;
  int64_t first_held_ns_ = 0;
};

}  // namespace kreplay
