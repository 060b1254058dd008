// JS side of `kreplay replay --exec`'s supervisor: the ExecSupervisor class
// and the hand-over of the seccomp listener from the launcher.
#pragma once

#include <napi.h>

namespace kreplay {

void ExportExec(Napi::Env env, Napi::Object exports);

}  // namespace kreplay
