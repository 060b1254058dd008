// The base of the addon's failures: each carries the string code JS sees on its Error.
#pragma once

#include <stdexcept>
#include <string>

namespace kreplay {

class NativeFailure : public std::runtime_error {
 public:
  NativeFailure(std::string code, const std::string& message) : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

}  // namespace kreplay
