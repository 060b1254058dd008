// RequestKeys: the agent's keys of the requests it records, per connection (request_key.h's
// Statements, inferring MySQL's statement ids as the capture sees no answers), so that a prepared
// statement's execute is keyed by the statement's text as the relay keys the build's.
#include "request_keys_binding.h"

#include <deque>
#include <string>
#include <unordered_map>

#include "request_key.h"

namespace kreplay {

namespace {

// connections remembered at once: the oldest is forgotten first (its statements then unknown, never wrong)
constexpr size_t kMaxConnections = 4096;

class RequestKeysJs : public Napi::ObjectWrap<RequestKeysJs> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "RequestKeys", {InstanceMethod("key", &RequestKeysJs::Key)});
  }
  explicit RequestKeysJs(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RequestKeysJs>(info) {}

 private:
  // key(connection: string, bytes: Uint8Array) -> the key of the connection's next request
  Napi::Value Key(const Napi::CallbackInfo& info) {
    if (info.Length() != 2 || !info[0].IsString() || !info[1].IsTypedArray())
      throw Napi::TypeError::New(info.Env(), "key(connection: string, bytes: Uint8Array)");
    const std::string connection = info[0].As<Napi::String>().Utf8Value();
    auto bytes = info[1].As<Napi::Uint8Array>();
    auto found = connections_.find(connection);
    if (found == connections_.end()) {
      if (connections_.size() >= kMaxConnections) {
        connections_.erase(order_.front());
        order_.pop_front();
      }
      found = connections_.emplace(connection, Statements(true)).first;
      order_.push_back(connection);
    }
    return Napi::Number::New(info.Env(), found->second.Key(bytes.Data(), bytes.ElementLength()));
  }

  std::unordered_map<std::string, Statements> connections_;
  std::deque<std::string> order_;
};

}  // namespace

void ExportRequestKeys(Napi::Env env, Napi::Object exports) { exports.Set("RequestKeys", RequestKeysJs::Define(env)); }

}  // namespace kreplay
