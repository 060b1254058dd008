// exports.RequestKeys: the agent's keys of recorded requests, per connection (request_key.h).
#pragma once

#include <napi.h>

namespace kreplay {

void ExportRequestKeys(Napi::Env env, Napi::Object exports);

}  // namespace kreplay
