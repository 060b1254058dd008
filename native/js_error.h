// A CodedError as the JS Error with a `code` the TypeScript side turns into its KreplayError.
#pragma once

#include <napi.h>

#include "coded_error.h"

namespace kreplay {

inline Napi::Error ToJsError(Napi::Env env, const CodedError& failure) {
  Napi::Error error = Napi::Error::New(env, failure.what());
  error.Set("code", Napi::String::New(env, failure.code()));
  return error;
}

}  // namespace kreplay
