// The read end of the replay clock's doorbell pipe, polled on Node's loop by libuv itself: a
// ring costs the main thread a read(2) and one call into JS, with no stream, Buffer or event
// emitter between (a net.Socket took a fifth of the thread's time in a sparse play).
#pragma once

#include <napi.h>

namespace kreplay {

// new DoorbellWatch(readFd, onRing) owns readFd: each time bytes arrive it reads them all and
// calls onRing() once; when the pipe fails or its write end closes it stops and calls
// onRing(error) (code E_PIPE) once. ref()/unref() say whether it keeps the loop alive (it starts
// unref'd); close() stops it and closes the fd.
Napi::Function DefineDoorbellWatch(Napi::Env env);

}  // namespace kreplay
