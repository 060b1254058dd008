// A descriptor the addon polls for reading on Node's loop (uv_poll), owned and closed by it, and
// stopped by the environment's teardown while the loop still runs, before any finalizer.
#pragma once

#include <napi.h>

#include <string>
#include <vector>

struct uv_poll_s;

namespace kreplay {

class PolledFd {
 public:
  // status: 0, or libuv's error for a descriptor it stopped polling (POLLERR), which the owner names
  using OnReadable = void (*)(void* owner, int status);

  PolledFd() = default;
  PolledFd(const PolledFd&) = delete;
  PolledFd& operator=(const PolledFd&) = delete;
  ~PolledFd() { Stop(); }

  // Polls `fd` (taking it: closed by Stop) and calls onReadable(owner, status) each time it is
  // readable or has failed; it
  // does not keep the loop alive. Throws NativeFailure(code, "cannot poll <what>") and closes
  // nothing when it cannot.
  void Start(napi_env env, int fd, void* owner, OnReadable on_readable, const char* code, const std::string& what);
  // Stops polling and closes the descriptor; idempotent.
  void Stop();
  // Whether the poll keeps the loop alive.
  void KeepAlive(bool on);
  int fd() const { return fd_; }

 private:
  static void OnPoll(uv_poll_s* handle, int status, int events);
  static void OnTeardown(void* arg);

  int fd_ = -1;
  uv_poll_s* poll_ = nullptr;
  void* owner_ = nullptr;
  OnReadable on_readable_ = nullptr;
  napi_env env_ = nullptr;
  bool hooked_ = false;
};

// Calls `fn` from a poll's callback, as Node calls into JS from its loop (its microtasks run after).
// The callbacks catch their own errors; one that escapes is dropped here, not thrown into libuv.
void CallFromLoop(const Napi::FunctionReference& fn, const std::vector<napi_value>& args);

}  // namespace kreplay
