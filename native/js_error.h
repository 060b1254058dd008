// A CaptureFailure as the JS Error the TypeScript side turns into a CaptureError.
#pragma once

#include <napi.h>

#include "capture_error.h"

namespace kreplay {

inline Napi::Error ToJsError(Napi::Env env, const CaptureFailure& failure) {
  Napi::Error error = Napi::Error::New(env, failure.what());
  error.Set("code", Napi::String::New(env, failure.code()));
  return error;
}

}  // namespace kreplay
