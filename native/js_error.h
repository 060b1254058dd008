// A NativeFailure as a JS Error with its code; each TypeScript caller turns it into its own class.
#pragma once

#include <napi.h>

#include "native_error.h"

namespace kreplay {

inline Napi::Error ToJsError(Napi::Env env, const NativeFailure& failure) {
  Napi::Error error = Napi::Error::New(env, failure.what());
  error.Set("code", Napi::String::New(env, failure.code()));
  return error;
}

}  // namespace kreplay
