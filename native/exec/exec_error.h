// Failures of `kreplay replay --exec`'s supervisor, each with the string code
// JS sees on its Error (E_SECCOMP, E_EXEC_HANDOFF, E_EXEC_PLAN).
#pragma once

#include <napi.h>

#include <stdexcept>
#include <string>

namespace kreplay {

class ExecFailure : public std::runtime_error {
 public:
  ExecFailure(std::string code, const std::string& message) : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// `what` failed with errno `err`: an ExecFailure with `code` naming both.
ExecFailure ExecSystemFailure(const char* code, const std::string& what, int err);

inline Napi::Error ToJsError(Napi::Env env, const ExecFailure& failure) {
  Napi::Error error = Napi::Error::New(env, failure.what());
  error.Set("code", Napi::String::New(env, failure.code()));
  return error;
}

}  // namespace kreplay
