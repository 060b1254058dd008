#include "polled_fd.h"

#include <unistd.h>
#include <uv.h>

#include "native_error.h"

namespace kreplay {

namespace {

void ClosePoll(uv_poll_t* poll) {
  uv_close(reinterpret_cast<uv_handle_t*>(poll), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
}

}  // namespace

void PolledFd::Start(napi_env env, int fd, void* owner, OnReadable on_readable, const char* code,
                     const std::string& what) {
  uv_loop_s* loop = nullptr;
  napi_get_uv_event_loop(env, &loop);
  auto* poll = new uv_poll_t;
  poll->data = this;
  if (loop == nullptr || uv_poll_init(loop, poll, fd) != 0) {
    delete poll;
    throw NativeFailure(code, "cannot poll " + what);
  }
  if (uv_poll_start(poll, UV_READABLE, OnPoll) != 0) {
    ClosePoll(poll);
    throw NativeFailure(code, "cannot poll " + what);
  }
  uv_unref(reinterpret_cast<uv_handle_t*>(poll));
  fd_ = fd;
  poll_ = poll;
  owner_ = owner;
  on_readable_ = on_readable;
  env_ = env;
  hooked_ = napi_add_env_cleanup_hook(env_, OnTeardown, this) == napi_ok;
}

void PolledFd::Stop() {
  if (hooked_) napi_remove_env_cleanup_hook(env_, OnTeardown, this);
  hooked_ = false;
  if (poll_ == nullptr) return;
  uv_poll_stop(poll_);
  poll_->data = nullptr;
  ClosePoll(poll_);
  poll_ = nullptr;
  close(fd_);
  fd_ = -1;
}

void PolledFd::KeepAlive(bool on) {
  if (poll_ == nullptr) return;
  if (on)
    uv_ref(reinterpret_cast<uv_handle_t*>(poll_));
  else
    uv_unref(reinterpret_cast<uv_handle_t*>(poll_));
}

void PolledFd::OnPoll(uv_poll_s* handle, int status, int /*events*/) {
  auto* self = static_cast<PolledFd*>(handle->data);
  if (self != nullptr) self->on_readable_(self->owner_, status);
}

void CallFromLoop(const Napi::FunctionReference& fn, const std::vector<napi_value>& args) {
  try {
    fn.MakeCallback(fn.Env().Global(), args);
  } catch (const Napi::Error&) {
    // dropped: an exception thrown into libuv's callback would end the process
  }
}

void PolledFd::OnTeardown(void* arg) {
  auto* self = static_cast<PolledFd*>(arg);
  self->hooked_ = false;  // a hook is not removed while it runs
  self->Stop();
}

}  // namespace kreplay
