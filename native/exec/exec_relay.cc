#include "exec_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <deque>

#include "exec_error.h"
#include "request_key.h"

namespace kreplay {

namespace {

constexpr size_t kReadChunk = 64 * 1024;
// per direction, bytes buffered before the relay stops reading that side
constexpr size_t kMaxBuffered = 1 << 20;
// how long the real peer may take to accept the relay's connect
constexpr int kUpstreamConnectMs = 5000;
// a stuffed socket's send buffer: far more than the relay's closed window takes
constexpr int kStuffSendBuffer = 256 * 1024;
constexpr int kStuffRounds = 50;
// a connect due sooner than this completes at once
constexpr int64_t kMinConnectHoldNs = 200'000;
constexpr int64_t kNever = INT64_MAX;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void SetNonblocking(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

uint16_t LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  return ntohs(addr.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&addr)->sin_port
                                         : reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
}

// Writes what it can of the first `limit` bytes of `buffer` to `fd`; false on a failure other than a full socket.
bool Flush(int fd, std::string* buffer, size_t limit = SIZE_MAX) {
  while (!buffer->empty() && limit > 0) {
    const ssize_t n = send(fd, buffer->data(), std::min(limit, buffer->size()), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    buffer->erase(0, static_cast<size_t>(n));
    limit -= static_cast<size_t>(n);
  }
  return true;
}

// Whether `fd`'s peer reset the connection: a socket on loopback answers bytes sent to an end its
// process closed with a reset before send() returns, so this tells a build that closed (its timeout
// fired) from one that only shut its writing half and still reads. Reading SO_ERROR clears it.
bool PeerReset(int fd) {
  int error = 0;
  socklen_t len = sizeof error;
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && (error == ECONNRESET || error == EPIPE);
}

}  // namespace

uint32_t PickExchange(const ResponsePlan& plan, const std::vector<bool>& used, uint32_t key) {
  const size_t count = plan.holds_ns.size();
  auto keyOf = [&plan](size_t k) { return k < plan.request_keys.size() ? plan.request_keys[k] : 0; };
  for (size_t k = 0; k < count; k++)
    if (!used[k] && keyOf(k) == key) return static_cast<uint32_t>(k);
  for (size_t k = 0; k < count; k++)
    if (!used[k] && keyOf(k) == 0) return static_cast<uint32_t>(k);
  return kNoExchange;
}

// A response exchange the relay took for a request of the build, until its first bytes reach the build.
struct PendingExchange {
  uint32_t exchange;
  int64_t hold_ns;
  int64_t sent_ns;
  int64_t release_ns;
  // when the peer's answer began to arrive: past release_ns, the peer took longer than the incident
  int64_t arrived_ns;
  // where its answer begins among the peer's bytes to the build (Link::appended when it was taken)
  uint64_t from;
};

struct ExecRelay::Link {
  // r: the relay's end of the build's socket; u: the real peer; c: the build's socket while its connect is pending
  int r = -1, u = -1, c = -1;
  int response_target = -1;
  // stuffing bytes still to drop from r before the build's own
  uint64_t discard = 0;
  // r is not read before: the build's connect completes then
  int64_t open_ns = 0;
  int64_t started_ns = 0;
  int connect_target = -1;
  uint32_t connect_index = 0;
  std::string to_u, to_r;
  bool r_eof = false, u_eof = false, r_shut = false, u_shut = false;
  // the build sent since the last response began, and when it last did
  bool sent = false;
  int64_t last_send_ns = 0;
  // the first bytes of the build's request since the last response began (its key picks the exchange)
  std::string request;
  // what the connection's requests named (statements), for the keys of later ones
  Statements statements{false};
  // exchanges taken whose answer has not reached the build yet, oldest first: each answer is held to
  // its own release, and what follows it waits behind it (a pipelined client's next answer, or the
  // response after TLS 1.3's session tickets, when the build's request crossed them)
  std::deque<PendingExchange> pending;
  // the peer's bytes to the build so far: put in to_r, and sent on to the build
  uint64_t appended = 0, delivered = 0;
  uint32_t r_mask = 0, u_mask = 0;
};

// How many of to_r's first bytes may reach the build at `now` (those before the first answer still
// held), and when the next held ones may (kNever: none is held).
size_t ExecRelay::Releasable(const Link* link, int64_t now, int64_t* next) {
  *next = kNever;
  for (const PendingExchange& p : link->pending) {
    if (p.release_ns > now) {
      *next = p.release_ns;
      return static_cast<size_t>(p.from - link->delivered);
    }
  }
  return link->to_r.size();
}

ExecRelay::ExecRelay(std::vector<ResponsePlan> responses) : responses_(std::move(responses)) {
  for (const ResponsePlan& plan : responses_) used_.emplace_back(plan.holds_ns.size(), false);
}

ExecRelay::~ExecRelay() { Stop(); }

int ExecRelay::Listener(bool stuffing) {
  const int which = stuffing ? 1 : 0;
  if (listeners_[which] >= 0) return listeners_[which];
  if (epoll_fd_ < 0) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) throw ExecSystemFailure("E_EXEC_RELAY", "cannot make the relay's epoll", errno);
    epoll_event wake{EPOLLIN, {.ptr = nullptr}};
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake);
    thread_ = std::thread(&ExecRelay::Run, this);
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw ExecSystemFailure("E_EXEC_RELAY", "cannot make the relay's listener", errno);
  // a stuffed connect's window closes after a few KiB (inherited by the accepted socket)
  const int tiny = 1;
  if (stuffing) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tiny, sizeof tiny);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 64) != 0) {
    const int err = errno;
    close(fd);
    throw ExecSystemFailure("E_EXEC_RELAY", "cannot listen on loopback for the relay", err);
  }
  listeners_[which] = fd;
  ports_[which] = LocalPort(fd);
  return fd;
}

int ExecRelay::Open(const sockaddr_storage& peer, socklen_t peer_len, int family, bool nonblocking, int response_target,
                    int64_t received_ns, int64_t open_at_ns, int connect_target, uint32_t connect_index, int* err) {
  const int64_t started = NowNs();
  // the real peer first: the build's connect fails as the real one does
  const int u = socket(peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (u < 0) {
    *err = errno;
    return -1;
  }
  int failure = 0;
  if (connect(u, reinterpret_cast<const sockaddr*>(&peer), peer_len) != 0 && errno != EINPROGRESS) {
    failure = errno;
  } else {
    pollfd pfd{u, POLLOUT, 0};
    int ready;
    do ready = poll(&pfd, 1, kUpstreamConnectMs);
    while (ready < 0 && errno == EINTR);
    socklen_t len = sizeof failure;
    if (ready == 0)
      failure = ETIMEDOUT;
    else
      getsockopt(u, SOL_SOCKET, SO_ERROR, &failure, &len);
  }
  if (failure != 0) {
    close(u);
    *err = failure;
    return -1;
  }
  const bool stuffing = nonblocking && open_at_ns - started > kMinConnectHoldNs;
  const int listener = Listener(stuffing);
  const int c = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c < 0) {
    *err = errno;
    close(u);
    return -1;
  }
  if (stuffing) setsockopt(c, SOL_SOCKET, SO_SNDBUF, &kStuffSendBuffer, sizeof kStuffSendBuffer);
  sockaddr_storage relay{};
  socklen_t relay_len;
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&relay);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(ports_[stuffing ? 1 : 0]);
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6->sin6_addr);
    relay_len = sizeof *in6;
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&relay);
    in->sin_family = AF_INET;
    in->sin_port = htons(ports_[stuffing ? 1 : 0]);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    relay_len = sizeof *in;
  }
  int r = -1;
  if (connect(c, reinterpret_cast<sockaddr*>(&relay), relay_len) == 0) {
    // the listener's queue holds our connection (and any stray one, dropped)
    const uint16_t port = LocalPort(c);
    for (int tries = 0; tries < 16 && r < 0; tries++) {
      sockaddr_storage from{};
      socklen_t from_len = sizeof from;
      const int fd = accept4(listener, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      if (ntohs(reinterpret_cast<sockaddr_in*>(&from)->sin_port) == port)
        r = fd;
      else
        close(fd);
    }
  }
  if (r < 0) {
    *err = ECONNREFUSED;
    close(c);
    close(u);
    return -1;
  }
  auto* link = new Link;
  link->r = r;
  link->u = u;
  link->response_target = response_target;
  link->started_ns = received_ns;
  link->connect_target = connect_target;
  link->connect_index = connect_index;
  if (stuffing) {
    // fill the closed window until the build's socket has bytes it cannot send: with
    // TCP_NOTSENT_LOWAT 1 it is unwritable, so the build's poll waits for the connect
    const int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &one, sizeof one);
    SetNonblocking(c, true);
    static const char zeros[kReadChunk] = {};
    uint64_t stuffed = 0;
    bool closed = false;
    for (int round = 0; round < kStuffRounds && !closed; round++) {
      ssize_t n;
      while ((n = send(c, zeros, sizeof zeros, MSG_NOSIGNAL)) > 0) stuffed += static_cast<uint64_t>(n);
      int unsent = 0;
      ioctl(c, SIOCOUTQNSD, &unsent);
      pollfd pfd{c, POLLOUT, 0};
      closed = unsent > 0 && poll(&pfd, 1, 0) == 0;
      if (!closed) usleep(200);
    }
    link->discard = stuffed;
    link->open_ns = closed ? open_at_ns : 0;
    link->c = dup(c);
  }
  SetNonblocking(c, nonblocking);
  {
    std::lock_guard<std::mutex> lock(adopt_mutex_);
    adopt_.push_back(link);
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  return c;
}

void ExecRelay::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  thread_.join();
  Adopt();
  while (!links_.empty()) Close(links_.begin()->first);
  for (int fd : listeners_)
    if (fd >= 0) close(fd);
  close(epoll_fd_);
  close(wake_fd_);
}

void ExecRelay::Adopt() {
  std::vector<Link*> links;
  {
    std::lock_guard<std::mutex> lock(adopt_mutex_);
    links.swap(adopt_);
  }
  for (Link* link : links) {
    links_.emplace(link, true);
    epoll_event r{0, {.ptr = link}};
    epoll_event u{0, {.ptr = link}};
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, link->r, &r);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, link->u, &u);
    Process(link, NowNs());
  }
}

void ExecRelay::Run() {
  epoll_event events[64];
  while (!stopping_) {
    int64_t now = NowNs();
    int64_t next = kNever;
    for (const auto& [link, _] : links_) {
      if (link->open_ns > now) next = std::min(next, link->open_ns);
      int64_t held_until;
      if (!link->to_r.empty() && Releasable(link, now, &held_until) < link->to_r.size())
        next = std::min(next, held_until);
    }
    timespec wait{};
    if (next != kNever) {
      const int64_t ns = next - now;
      wait = {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    }
    const int ready = epoll_pwait2(epoll_fd_, events, 64, next == kNever ? nullptr : &wait, nullptr);
    if (ready < 0 && errno != EINTR) break;
    now = NowNs();
    std::vector<Link*> touched;
    for (int i = 0; i < ready; i++) {
      if (events[i].data.ptr == nullptr) {
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof count);
        Adopt();
        continue;
      }
      touched.push_back(static_cast<Link*>(events[i].data.ptr));
    }
    int64_t held_until;
    for (const auto& [link, _] : links_)
      if ((link->open_ns != 0 && link->open_ns <= now) || Releasable(link, now, &held_until) > 0)
        touched.push_back(link);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (Link* link : touched)
      if (links_.count(link)) Process(link, now);
  }
}

void ExecRelay::Process(Link* link, int64_t now) {
  char buf[kReadChunk];
  if (link->open_ns != 0 && link->open_ns <= now) link->open_ns = 0;
  // the build's bytes to the peer (after the stuffing, once its connect is due)
  while (link->open_ns == 0 && !link->r_eof && link->to_u.size() < kMaxBuffered) {
    const ssize_t n = recv(link->r, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) link->r_eof = true;
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN && errno != EINTR) link->r_eof = link->u_eof = true;  // the build is gone
      break;
    }
    const uint64_t skip = std::min<uint64_t>(link->discard, static_cast<uint64_t>(n));
    link->discard -= skip;
    if (static_cast<uint64_t>(n) > skip) {
      const size_t own = static_cast<size_t>(n) - skip;
      if (!link->sent) link->request.clear();
      if (link->request.size() < kRequestBytes)
        link->request.append(buf + skip, std::min<size_t>(own, kRequestBytes - link->request.size()));
      link->to_u.append(buf + skip, own);
      link->sent = true;
      link->last_send_ns = NowNs();
    }
  }
  if (link->discard == 0 && link->open_ns == 0) {
    // the build's connect is complete: its socket back to the default low-water mark
    if (link->c >= 0) {
      const int zero = 0;
      setsockopt(link->c, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &zero, sizeof zero);
      close(link->c);
      link->c = -1;
    }
    // reported once, stuffed or not (one due too soon to stuff completed at once)
    if (link->connect_target >= 0) {
      timings_.push_back({link->connect_target, link->connect_index, NowNs() - link->started_ns, -1, false});
      link->connect_target = -1;
    }
  }
  if (!Flush(link->u, &link->to_u)) link->u_eof = link->r_eof = true;
  if (link->r_eof && link->to_u.empty() && !link->u_shut) {
    shutdown(link->u, SHUT_WR);
    link->u_shut = true;
  }
  // the peer's bytes to the build: the first of each response held to the incident's response time
  while (!link->u_eof && link->to_r.size() < kMaxBuffered) {
    const ssize_t n = recv(link->u, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) link->u_eof = true;
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN && errno != EINTR) link->u_eof = true;
      break;
    }
    if (link->sent) {
      link->sent = false;
      const int target = link->response_target;
      // keyed with what the connection named before (a statement's id or name), then told of the answer
      const uint32_t key =
          link->statements.Key(reinterpret_cast<const uint8_t*>(link->request.data()), link->request.size());
      link->statements.Answer(reinterpret_cast<const uint8_t*>(buf), static_cast<size_t>(n));
      if (target >= 0) {
        const ResponsePlan& plan = responses_[target];
        const uint32_t k = PickExchange(plan, used_[target], key);
        if (k == kNoExchange) {
          // a request the incident never made (a health probe, a warm-up): passed through, never held
          timings_.push_back({target, kNoExchange, 0, -1, false});
        } else if (k < plan.ambiguous.size() && plan.ambiguous[k]) {
          // the incident made other requests this one cannot be told from, with other times: which
          // one it is decides its hold, so it gets none
          used_[target][k] = true;
          timings_.push_back({target, k, 0, -1, true});
        } else {
          used_[target][k] = true;
          if (first_held_ns_ == 0 || link->last_send_ns < first_held_ns_) first_held_ns_ = link->last_send_ns;
          const int64_t hold_ns = plan.holds_ns[k];
          link->pending.push_back(
              {k, hold_ns, link->last_send_ns, link->last_send_ns + hold_ns, NowNs(), link->appended});
        }
      }
    }
    link->to_r.append(buf, static_cast<size_t>(n));
    link->appended += static_cast<uint64_t>(n);
  }
  now = NowNs();
  int64_t held_until;
  if (const size_t releasable = Releasable(link, now, &held_until); releasable > 0) {
    const size_t before = link->to_r.size();
    if (!Flush(link->r, &link->to_r, releasable)) link->r_eof = link->u_eof = true;
    if (link->r_eof && PeerReset(link->r)) {
      // the build sent its end's FIN while this was held and had closed it, not only its writing
      // half: the bytes were refused, never delivered, and Close() reports the exchanges given up
      link->u_eof = true;
      link->to_r.clear();
    } else {
      link->delivered += before - link->to_r.size();
      // an exchange is delivered with its answer's first byte
      for (; !link->pending.empty() && link->pending.front().from < link->delivered; link->pending.pop_front()) {
        const PendingExchange& p = link->pending.front();
        // an answer that came after its release time was held not at all: its intended time is the peer's own
        const int64_t intended = std::max(p.hold_ns, p.arrived_ns - p.sent_ns);
        timings_.push_back({link->response_target, p.exchange, now - p.sent_ns, intended, false});
      }
    }
  }
  if (link->u_eof && link->to_r.empty() && !link->r_shut) {
    shutdown(link->r, SHUT_WR);
    link->r_shut = true;
  }
  if (link->r_eof && link->u_eof && link->to_u.empty() && link->to_r.empty()) {
    Close(link);
    return;
  }
  Update(link);
}

void ExecRelay::Update(Link* link) {
  const int64_t now = NowNs();
  uint32_t r_mask = 0, u_mask = 0;
  if (link->open_ns == 0 && !link->r_eof && link->to_u.size() < kMaxBuffered) r_mask |= EPOLLIN;
  int64_t held_until;
  if (Releasable(link, now, &held_until) > 0) r_mask |= EPOLLOUT;
  if (!link->u_eof && link->to_r.size() < kMaxBuffered) u_mask |= EPOLLIN;
  if (!link->to_u.empty()) u_mask |= EPOLLOUT;
  // a side at its end reports hang-ups forever: it leaves the epoll set
  auto set = [this, link](int fd, uint32_t mask, uint32_t* current, bool done) {
    if (*current == UINT32_MAX) return;
    if (done && mask == 0) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      *current = UINT32_MAX;
      return;
    }
    if (mask == *current) return;
    epoll_event event{mask, {.ptr = link}};
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event);
    *current = mask;
  };
  set(link->r, r_mask, &link->r_mask, link->r_eof);
  set(link->u, u_mask, &link->u_mask, link->u_eof);
}

void ExecRelay::Close(Link* link) {
  // the build closed its end while a response was held (its own timeout fired): held, never delivered
  for (const PendingExchange& p : link->pending)
    timings_.push_back({link->response_target, p.exchange, -1, p.hold_ns, false});
  if (link->c >= 0) close(link->c);
  close(link->r);
  close(link->u);
  links_.erase(link);
  delete link;
}

}  // namespace kreplay
