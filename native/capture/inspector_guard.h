// The Node inspector guard (bpf/inspector_guard.bpf.c) as a JS object: the kernel refuses every
// connect to a guarded port of a local address but the agent's, and records who tried.
#pragma once

#include <napi.h>

namespace kreplay {

// new InspectorGuard() loads the programs and attaches them to the cgroup v2 root; then
// guard(port), unguard(port), refused(port), drain() -> [{ pid, uid, port, comm }], close().
Napi::Function DefineInspectorGuard(Napi::Env env);

}  // namespace kreplay
