#include "clock_set_watch.h"

#include <errno.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <uv.h>

#include <cstdint>
#include <string>

#include "js_error.h"
#include "native_error.h"

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
    try {
      fd_ = OpenClockSetTimer();
    } catch (const NativeFailure& failure) {
      throw ToJsError(info.Env(), failure);
    }
    uv_loop_s* loop = nullptr;
    napi_get_uv_event_loop(info.Env(), &loop);
    poll_ = new uv_poll_t;
    poll_->data = this;
    if (uv_poll_init(loop, poll_, fd_) != 0 || uv_poll_start(poll_, UV_READABLE, OnReadable) != 0) {
      delete poll_;
      poll_ = nullptr;
      close(fd_);
      throw ToJsError(info.Env(), NativeFailure(kCode, "cannot poll the wall clock's set timer"));
    }
    uv_unref(reinterpret_cast<uv_handle_t*>(poll_));
    // the environment's teardown closes the handle while the loop still runs, before any finalizer
    env_ = info.Env();
    hooked_ = napi_add_env_cleanup_hook(env_, OnTeardown, this) == napi_ok;
  }
  ~ClockSetWatch() override { Stop(); }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    Stop();
    return info.Env().Undefined();
  }

 private:
  static void OnReadable(uv_poll_t* handle, int status, int /*events*/) {
    auto* self = static_cast<ClockSetWatch*>(handle->data);
    if (self == nullptr || status < 0) return;
    bool set = false;
    try {
      set = TakeClockSet(self->fd_);
    } catch (const NativeFailure&) {
      // not armed again: the watch cannot go on, and a set it misses is caught by the periodic resync
      self->Stop();
      return;
    }
    if (!set) return;
    Napi::Env env = self->on_set_.Env();
    Napi::HandleScope scope(env);
    try {
      self->on_set_.MakeCallback(env.Global(), {});
    } catch (const Napi::Error&) {
      // the callback catches its own errors (agent/capture/host.ts); one that escaped is dropped here
    }
  }

  static void OnTeardown(void* arg) {
    auto* self = static_cast<ClockSetWatch*>(arg);
    self->hooked_ = false;  // a hook is not removed while it runs
    self->Stop();
  }

  void Stop() {
    if (hooked_) napi_remove_env_cleanup_hook(env_, OnTeardown, this);
    hooked_ = false;
    if (poll_ == nullptr) return;
    uv_poll_stop(poll_);
    poll_->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
    poll_ = nullptr;
    close(fd_);
    fd_ = -1;
  }

  Napi::FunctionReference on_set_;
  int fd_ = -1;
  uv_poll_t* poll_ = nullptr;
  napi_env env_ = nullptr;
  bool hooked_ = false;
};

}  // namespace

Napi::Function DefineClockSetWatch(Napi::Env env) {
  return ClockSetWatch::DefineClass(env, "ClockSetWatch",
                                    {ClockSetWatch::InstanceMethod("close", &ClockSetWatch::Close)});
}

}  // namespace kreplay
