#include "doorbell_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "js_error.h"
#include "native_error.h"
#include "polled_fd.h"

namespace kreplay {

namespace {

constexpr const char* kCode = "E_PIPE";

enum class Drained { kNothing, kRead, kClosed, kFailed };

// Reads every byte the pipe holds: the bytes only wake the loop.
Drained Drain(int fd, int* err) {
  char bytes[256];
  bool read_some = false;
  for (;;) {
    const ssize_t n = read(fd, bytes, sizeof bytes);
    if (n > 0) {
      read_some = true;
      continue;
    }
    if (n == 0) return Drained::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return read_some ? Drained::kRead : Drained::kNothing;
    *err = errno;
    return Drained::kFailed;
  }
}

class DoorbellWatch : public Napi::ObjectWrap<DoorbellWatch> {
 public:
  explicit DoorbellWatch(const Napi::CallbackInfo& info) : Napi::ObjectWrap<DoorbellWatch>(info) {
    if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsFunction())
      throw Napi::TypeError::New(info.Env(), "new DoorbellWatch(readFd, onRing) takes a descriptor and a function");
    // NaN or 3.5 would be taken as another descriptor (Int32Value rounds), one this must not own
    const double given = info[0].As<Napi::Number>().DoubleValue();
    if (!(given >= 0 && given <= INT_MAX && std::floor(given) == given))
      throw Napi::TypeError::New(info.Env(),
                                 "new DoorbellWatch: " + info[0].ToString().Utf8Value() + " is no descriptor");
    const int fd = static_cast<int>(given);
    on_ring_ = Napi::Persistent(info[1].As<Napi::Function>());
    try {
      // its reads drain the pipe until it is empty: they must not block then
      const int flags = fcntl(fd, F_GETFL);
      if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        throw NativeFailure(kCode,
                            "cannot make descriptor " + std::to_string(fd) + " non-blocking: " + strerror(errno));
      pipe_.Start(info.Env(), fd, this, OnReadable, kCode, "the doorbell pipe " + std::to_string(fd));
    } catch (const NativeFailure& failure) {
      throw ToJsError(info.Env(), failure);
    }
  }

  Napi::Value Ref(const Napi::CallbackInfo& info) {
    pipe_.KeepAlive(true);
    return info.Env().Undefined();
  }

  Napi::Value Unref(const Napi::CallbackInfo& info) {
    pipe_.KeepAlive(false);
    return info.Env().Undefined();
  }

  Napi::Value Close(const Napi::CallbackInfo& info) {
    pipe_.Stop();
    return info.Env().Undefined();
  }

 private:
  static void OnReadable(void* owner, int status) {
    auto* self = static_cast<DoorbellWatch*>(owner);
    int err = 0;
    // libuv stopped polling a descriptor in error: said as a failed read would be
    const Drained drained = status < 0 ? Drained::kFailed : Drain(self->pipe_.fd(), &err);
    // a poll woken with nothing to read (its bytes read by the last call) is no ring
    if (drained == Drained::kNothing) return;
    Napi::Env env = self->on_ring_.Env();
    Napi::HandleScope scope(env);
    std::vector<napi_value> args;
    if (drained != Drained::kRead) {
      // a pipe that failed or lost its writer would poll readable for ever: it stops here, once
      const std::string why = drained == Drained::kClosed ? "the doorbell pipe's write end closed"
                                                          : std::string("cannot read the doorbell pipe: ") +
                                                                (status < 0 ? uv_strerror(status) : strerror(err));
      self->pipe_.Stop();
      args.push_back(ToJsError(env, NativeFailure(kCode, why)).Value());
    }
    CallFromLoop(self->on_ring_, args);
  }

  Napi::FunctionReference on_ring_;
  PolledFd pipe_;
};

}  // namespace

Napi::Function DefineDoorbellWatch(Napi::Env env) {
  return DoorbellWatch::DefineClass(env, "DoorbellWatch",
                                    {DoorbellWatch::InstanceMethod("ref", &DoorbellWatch::Ref),
                                     DoorbellWatch::InstanceMethod("unref", &DoorbellWatch::Unref),
                                     DoorbellWatch::InstanceMethod("close", &DoorbellWatch::Close)});
}

}  // namespace kreplay
