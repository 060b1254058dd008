#include "clock_set_watch.h"

#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "js_error.h"
#include "native_error.h"
#include "polled_fd.h"

namespace kreplay {

namespace {

constexpr const char* kCode = "E_CLOCK_WATCH";
// Far enough that it never expires in practice; a clock set past it expires it, which reads as a set.
constexpr time_t kExpiryAheadS = 100LL * 365 * 24 * 3600;

void Arm(int fd) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  itimerspec spec = {};
  spec.it_value.tv_sec = now.tv_sec + kExpiryAheadS;
  if (timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &spec, nullptr) != 0)
    throw NativeFailure(kCode, std::string("cannot arm the wall clock's set timer: ") + strerror(errno));
}

// Opens and arms the timer; throws NativeFailure E_CLOCK_WATCH.
int OpenClockSetTimer() {
  const int fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) throw NativeFailure(kCode, std::string("cannot open a timer on the wall clock: ") + strerror(errno));
  try {
    Arm(fd);
  } catch (...) {
    close(fd);
    throw;
  }
  return fd;
}

// After the timer polled readable: whether the wall clock was set since it was armed (it is armed
// again then). Its far expiry passing is taken as a set too: the offset is re-read either way.
bool TakeClockSet(int fd) {
  uint64_t expirations = 0;
  const ssize_t n = read(fd, &expirations, sizeof(expirations));
  if (n < 0 && errno == EAGAIN) return false;
  // ECANCELED: the clock was set; 8 bytes: the far expiry passed (the clock set beyond it)
  Arm(fd);
  return true;
}

class ClockSetWatch : public Napi::ObjectWrap<ClockSetWatch> {
 public:
  explicit ClockSetWatch(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ClockSetWatch>(info) {
    if (info.Length() < 1 || !info[0].IsFunction())
      throw Napi::TypeError::New(info.Env(), "new ClockSetWatch(onSet) takes a function");
    on_set_ = Napi::Persistent(info[0].As<Napi::Function>());
    int fd = -1;
    try {
      fd = OpenClockSetTimer();
      timer_.Start(info.Env(), fd, this, OnReadable, kCode, "the wall clock's set timer");
    } catch (const NativeFailure& failure) {
      if (fd >= 0 && timer_.fd() < 0) close(fd);
      throw ToJsError(info.Env(), failure);
    }
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    timer_.Stop();
    return info.Env().Undefined();
  }

 private:
  static void OnReadable(void* owner, int status) {
    // a timer libuv stopped polling is not read: a set it misses is caught by the periodic resync
    if (status < 0) return;
    auto* self = static_cast<ClockSetWatch*>(owner);
    bool set = false;
    try {
      set = TakeClockSet(self->timer_.fd());
    } catch (const NativeFailure&) {
      // not armed again: the watch cannot go on, and a set it misses is caught by the periodic resync
      self->timer_.Stop();
      return;
    }
    if (!set) return;
    Napi::HandleScope scope(self->on_set_.Env());
    CallFromLoop(self->on_set_, {});
  }

  Napi::FunctionReference on_set_;
  PolledFd timer_;
};

}  // namespace

Napi::Function DefineClockSetWatch(Napi::Env env) {
  return ClockSetWatch::DefineClass(env, "ClockSetWatch",
                                    {ClockSetWatch::InstanceMethod("close", &ClockSetWatch::Close)});
}

}  // namespace kreplay
