// JS side of `kreplay replay --exec`'s supervisor: the ExecSupervisor class,
// the hand-over of the seccomp listener from the launcher, and the matcher
// alone (execMatch, portKey) for tests and the plan's keys.
#pragma once

#include <napi.h>

namespace kreplay {

void ExportExec(Napi::Env env, Napi::Object exports);

}  // namespace kreplay
