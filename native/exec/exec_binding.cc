#include "exec_binding.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "exec_error.h"
#include "exec_proc_net.h"
#include "exec_relay.h"
#include "exec_supervisor.h"

namespace kreplay {

namespace {

const char* CallName(CallKind call) {
  switch (call) {
    case CallKind::kFsync:
      return "fsync";
    case CallKind::kConnect:
      return "connect";
    case CallKind::kResponse:
      return "response";
    case CallKind::kWrite:
      break;
  }
  return "write";
}

CallKind ParseCall(Napi::Env env, Napi::Value value) {
  const std::string name = value.IsString() ? value.As<Napi::String>().Utf8Value() : "";
  for (CallKind call : {CallKind::kWrite, CallKind::kFsync, CallKind::kConnect, CallKind::kResponse})
    if (name == CallName(call)) return call;
  throw ToJsError(env, ExecFailure("E_EXEC_PLAN", "call must be write, fsync, connect or response, got " + name));
}

// A BigInt64Array's values; undefined is empty where `optional`.
std::vector<int64_t> Int64s(Napi::Env env, Napi::Value value, const char* name, bool optional) {
  if (optional && value.IsUndefined()) return {};
  if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_bigint64_array)
    throw ToJsError(env, ExecFailure("E_EXEC_PLAN", std::string(name) + " must be a BigInt64Array"));
  Napi::TypedArrayOf<int64_t> array = value.As<Napi::TypedArrayOf<int64_t>>();
  return std::vector<int64_t>(array.Data(), array.Data() + array.ElementLength());
}

// plan.pace: duration or timeline
Pace ParsePace(Napi::Env env, Napi::Object plan) {
  const std::string pace = plan.Get("pace").As<Napi::String>().Utf8Value();
  if (pace != "duration" && pace != "timeline")
    throw ToJsError(env, ExecFailure("E_EXEC_PLAN", "pace must be duration or timeline, got " + pace));
  return pace == "duration" ? Pace::kDuration : Pace::kTimeline;
}

// plan.targets: [{call, keys, holdsNs, errnos?, bytesEnd?, spansNs?, requestKeys?, ambiguous?}] (NativeExecTarget)
std::vector<TargetPlan> ParseTargets(Napi::Env env, Napi::Object plan) {
  std::vector<TargetPlan> targets;
  Napi::Array list = plan.Get("targets").As<Napi::Array>();
  for (uint32_t i = 0; i < list.Length(); i++) {
    Napi::Object entry = list.Get(i).As<Napi::Object>();
    TargetPlan target;
    target.call = ParseCall(env, entry.Get("call"));
    Napi::Array keys = entry.Get("keys").As<Napi::Array>();
    for (uint32_t k = 0; k < keys.Length(); k++) target.keys.push_back(keys.Get(k).As<Napi::String>().Utf8Value());
    if (target.keys.empty()) throw ToJsError(env, ExecFailure("E_EXEC_PLAN", "a target without keys"));
    target.holds_ns = Int64s(env, entry.Get("holdsNs"), "holdsNs", false);
    target.bytes_end = Int64s(env, entry.Get("bytesEnd"), "bytesEnd", true);
    target.spans_ns = Int64s(env, entry.Get("spansNs"), "spansNs", true);
    Napi::Value keys_of_requests = entry.Get("requestKeys");
    if (!keys_of_requests.IsUndefined()) {
      if (!keys_of_requests.IsTypedArray() ||
          keys_of_requests.As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array)
        throw ToJsError(env, ExecFailure("E_EXEC_PLAN", "requestKeys must be a Uint32Array"));
      Napi::TypedArrayOf<uint32_t> array = keys_of_requests.As<Napi::TypedArrayOf<uint32_t>>();
      target.request_keys.assign(array.Data(), array.Data() + array.ElementLength());
      if (target.request_keys.size() != target.holds_ns.size())
        throw ToJsError(env, ExecFailure("E_EXEC_PLAN", "requestKeys and holdsNs differ in count"));
    }
    Napi::Value ambiguous = entry.Get("ambiguous");
    if (!ambiguous.IsUndefined()) {
      if (!ambiguous.IsTypedArray() || ambiguous.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array)
        throw ToJsError(env, ExecFailure("E_EXEC_PLAN", "ambiguous must be a Uint8Array"));
      Napi::Uint8Array array = ambiguous.As<Napi::Uint8Array>();
      target.ambiguous.assign(array.Data(), array.Data() + array.ElementLength());
      if (target.ambiguous.size() != target.holds_ns.size())
        throw ToJsError(env, ExecFailure("E_EXEC_PLAN", "ambiguous and holdsNs differ in count"));
    }
    Napi::Value errnos = entry.Get("errnos");
    if (!errnos.IsUndefined()) {
      if (!errnos.IsTypedArray() || errnos.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array)
        throw ToJsError(env, ExecFailure("E_EXEC_PLAN", "errnos must be an Int32Array"));
      Napi::TypedArrayOf<int32_t> array = errnos.As<Napi::TypedArrayOf<int32_t>>();
      target.errnos.assign(array.Data(), array.Data() + array.ElementLength());
    }
    targets.push_back(std::move(target));
  }
  return targets;
}

// new ExecSupervisor(listenerFd, {pace, targets, neverHeld?}, onEnd(error?))
class ExecSupervisorJs : public Napi::ObjectWrap<ExecSupervisorJs> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "ExecSupervisor",
                       {
                           InstanceMethod("setTimeline", &ExecSupervisorJs::SetTimeline),
                           InstanceMethod("bypass", &ExecSupervisorJs::Bypass),
                           InstanceMethod("stop", &ExecSupervisorJs::Stop),
                           InstanceMethod("results", &ExecSupervisorJs::Results),
                       });
  }

  explicit ExecSupervisorJs(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ExecSupervisorJs>(info) {
    Napi::Env env = info.Env();
    if (info.Length() != 3 || !info[0].IsNumber() || !info[1].IsObject() || !info[2].IsFunction())
      throw Napi::TypeError::New(env, "new ExecSupervisor(listenerFd, plan, onEnd)");
    const int listener = info[0].As<Napi::Number>().Int32Value();
    Napi::Object plan = info[1].As<Napi::Object>();
    const Pace pace = ParsePace(env, plan);
    std::vector<TargetPlan> targets = ParseTargets(env, plan);
    std::vector<NeverHeld> never_held;
    Napi::Value never = plan.Get("neverHeld");
    if (never.IsArray()) {
      Napi::Array files = never.As<Napi::Array>();
      for (uint32_t i = 0; i < files.Length(); i++) {
        Napi::Object file = files.Get(i).As<Napi::Object>();
        bool lossless = true;
        never_held.push_back({file.Get("dev").As<Napi::BigInt>().Uint64Value(&lossless),
                              file.Get("ino").As<Napi::BigInt>().Uint64Value(&lossless),
                              file.Get("label").As<Napi::String>().Utf8Value()});
      }
    }
    ended_ = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "kreplay-exec", 1, 1);
    try {
      supervisor_ = std::make_unique<ExecSupervisor>(
          listener, pace, std::move(targets),
          [this](const std::string& code, const std::string& message) { Ended(code, message); });
    } catch (const ExecFailure& failure) {
      close(listener);
      ended_.Release();
      throw ToJsError(env, failure);
    }
    supervisor_->NeverHold(std::move(never_held));
    supervisor_->Start();
  }

  ~ExecSupervisorJs() override {
    if (supervisor_) supervisor_->Stop();
  }

 private:
  // On the supervisor thread, once: hands the end (and its failure, if any) to JS.
  void Ended(const std::string& code, const std::string& message) {
    auto failure = std::make_shared<std::pair<std::string, std::string>>(code, message);
    ended_.BlockingCall([failure](Napi::Env env, Napi::Function callback) {
      if (failure->first.empty()) {
        callback.Call({});
        return;
      }
      callback.Call({ToJsError(env, ExecFailure(failure->first, failure->second)).Value()});
    });
  }

  void SetTimeline(const Napi::CallbackInfo& info) {
    if (info.Length() != 2 || !info[0].IsBoolean() || !info[1].IsNumber())
      throw Napi::TypeError::New(info.Env(), "setTimeline(playing, offsetNs)");
    supervisor_->SetTimeline(info[0].As<Napi::Boolean>().Value(), info[1].As<Napi::Number>().Int64Value());
  }

  void Bypass(const Napi::CallbackInfo&) { supervisor_->Bypass(); }

  // Set flag, join, release the thread-safe function.
  void Stop(const Napi::CallbackInfo&) {
    supervisor_->Stop();
    if (!released_) {
      released_ = true;
      ended_.Release();
    }
  }

  // After stop(): {targets: [{matched, passed, failed, bytes, observedNs, intendedNs: BigInt64Array,
  // exchanges, ambiguous: Uint32Array}],
  // unmatched: [{call, target, kind, calls}], bypassed}
  Napi::Value Results(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const SupervisorResults& results = supervisor_->results();
    Napi::Object out = Napi::Object::New(env);
    Napi::Array targets = Napi::Array::New(env, results.targets.size());
    for (uint32_t i = 0; i < results.targets.size(); i++) {
      const TargetResult& target = results.targets[i];
      Napi::Object entry = Napi::Object::New(env);
      entry.Set("matched", static_cast<double>(target.matched));
      entry.Set("passed", static_cast<double>(target.passed));
      entry.Set("failed", static_cast<double>(target.failed));
      entry.Set("bytes", static_cast<double>(target.bytes));
      const size_t count = std::min<size_t>(target.matched, target.observed_ns.size());
      auto observed = Napi::TypedArrayOf<int64_t>::New(env, count, napi_bigint64_array);
      std::copy(target.observed_ns.begin(), target.observed_ns.begin() + count, observed.Data());
      entry.Set("observedNs", observed);
      auto intended = Napi::TypedArrayOf<int64_t>::New(env, count, napi_bigint64_array);
      std::copy(target.intended_ns.begin(), target.intended_ns.begin() + count, intended.Data());
      entry.Set("intendedNs", intended);
      auto exchanges = Napi::TypedArrayOf<uint32_t>::New(env, target.exchanges.size(), napi_uint32_array);
      std::copy(target.exchanges.begin(), target.exchanges.end(), exchanges.Data());
      entry.Set("exchanges", exchanges);
      auto ambiguous = Napi::TypedArrayOf<uint32_t>::New(env, target.ambiguous.size(), napi_uint32_array);
      std::copy(target.ambiguous.begin(), target.ambiguous.end(), ambiguous.Data());
      entry.Set("ambiguous", ambiguous);
      targets.Set(i, entry);
    }
    out.Set("targets", targets);
    Napi::Array unmatched = Napi::Array::New(env, results.unmatched.size());
    uint32_t i = 0;
    for (const auto& [key, entry] : results.unmatched) {
      Napi::Object item = Napi::Object::New(env);
      item.Set("call", CallName(entry.call));
      item.Set("target", entry.name);
      item.Set("kind", TargetKindName(entry.kind));
      item.Set("calls", static_cast<double>(entry.calls));
      unmatched.Set(i++, item);
    }
    out.Set("unmatched", unmatched);
    out.Set("bypassed", static_cast<double>(results.bypassed));
    out.Set("peersFromProc", static_cast<double>(results.peers_from_proc));
    out.Set("realtime", results.realtime);
    out.Set("firstHeldNs", results.first_held_ns == 0 ? env.Null() : Napi::BigInt::New(env, results.first_held_ns));
    return out;
  }

  std::unique_ptr<ExecSupervisor> supervisor_;
  Napi::ThreadSafeFunction ended_;
  bool released_ = false;
};

// execSocketPair() -> [ours, theirs]: a close-on-exec unix stream pair; `theirs` becomes the launcher's fd 3.
Napi::Value ExecSocketPair(const Napi::CallbackInfo& info) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw ToJsError(info.Env(), ExecSystemFailure("E_EXEC_HANDOFF", "cannot make a socket pair", errno));
  Napi::Array out = Napi::Array::New(info.Env(), 2);
  out.Set(0u, fds[0]);
  out.Set(1u, fds[1]);
  return out;
}

// receiveMessage(fd, timeoutMs) -> {text, fd}: one message of the launcher, with the fd it
// carries (SCM_RIGHTS) or -1. Throws E_EXEC_HANDOFF on timeout or when the launcher is gone.
Napi::Value ReceiveMessage(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 2 || !info[0].IsNumber() || !info[1].IsNumber())
    throw Napi::TypeError::New(env, "receiveMessage(fd, timeoutMs)");
  const int fd = info[0].As<Napi::Number>().Int32Value();
  pollfd pfd{fd, POLLIN, 0};
  int ready;
  do {
    ready = poll(&pfd, 1, info[1].As<Napi::Number>().Int32Value());
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) throw ToJsError(env, ExecFailure("E_EXEC_HANDOFF", "the launcher did not answer in time"));
  if (ready < 0) throw ToJsError(env, ExecSystemFailure("E_EXEC_HANDOFF", "poll on the launcher's socket", errno));
  char body[256];
  iovec iov{body, sizeof body};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    cmsghdr align;
  } control;
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  const ssize_t got = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (got < 0) throw ToJsError(env, ExecSystemFailure("E_EXEC_HANDOFF", "recvmsg from the launcher", errno));
  if (got == 0)
    throw ToJsError(env,
                    ExecFailure("E_EXEC_HANDOFF", "the launcher exited during the hand-over (see its message above)"));
  int passed = -1;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (cmsg && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
    memcpy(&passed, CMSG_DATA(cmsg), sizeof passed);
  Napi::Object out = Napi::Object::New(env);
  out.Set("text", Napi::String::New(env, body, static_cast<size_t>(got)));
  out.Set("fd", passed);
  return out;
}

// execMatch(plan, calls: [{call, target, socket?, bytes?}]) -> [{target, held, releaseNs, errno, from, to}]:
// what the supervisor decides for each call in turn (exec_match.h: target -1 for none), without a build, for tests.
Napi::Value ExecMatch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 2 || !info[0].IsObject() || !info[1].IsArray())
    throw Napi::TypeError::New(env, "execMatch(plan, calls)");
  Napi::Object plan = info[0].As<Napi::Object>();
  const Pace pace = ParsePace(env, plan);
  const std::vector<TargetPlan> targets = ParseTargets(env, plan);
  const TargetIndex index(targets);
  std::vector<TargetMatcher> matchers;
  matchers.reserve(targets.size());
  try {
    for (const TargetPlan& target : targets) matchers.emplace_back(target, pace);
  } catch (const ExecFailure& failure) {
    throw ToJsError(env, failure);
  }
  Napi::Array calls = info[1].As<Napi::Array>();
  Napi::Array out = Napi::Array::New(env, calls.Length());
  for (uint32_t i = 0; i < calls.Length(); i++) {
    Napi::Object call = calls.Get(i).As<Napi::Object>();
    const Napi::Value bytes = call.Get("bytes");
    const bool sized = bytes.IsNumber();
    const int target = index.Find(ParseCall(env, call.Get("call")), call.Get("target").As<Napi::String>().Utf8Value(),
                                  call.Get("socket").ToBoolean().Value());
    const CallMatch match =
        target < 0 ? CallMatch{} : matchers[target].Next(sized, sized ? bytes.As<Napi::Number>().Int64Value() : 0);
    Napi::Object result = Napi::Object::New(env);
    result.Set("target", target);
    result.Set("held", match.held);
    result.Set("releaseNs", Napi::BigInt::New(env, match.release_ns));
    result.Set("errno", match.err);
    result.Set("from", static_cast<double>(match.from));
    result.Set("to", static_cast<double>(match.to));
    out.Set(i, result);
  }
  return out;
}

// portKey(target) -> `tcp *:5432` or null: the key sockets match on by port, for the plan's keys.
Napi::Value PortKeyJs(const Napi::CallbackInfo& info) {
  if (info.Length() != 1 || !info[0].IsString()) throw Napi::TypeError::New(info.Env(), "portKey(target)");
  const std::string key = PortKey(info[0].As<Napi::String>().Utf8Value());
  return key.empty() ? info.Env().Null() : Napi::String::New(info.Env(), key);
}

// execExchanges(recordedKeys, requestKeys) -> per request of the build, in order, the recorded
// exchange its response takes (PickExchange, as the relay picks it), or null: passed through.
Napi::Value ExecExchanges(const Napi::CallbackInfo& info) {
  const Napi::Env env = info.Env();
  if (info.Length() != 2 || !info[0].IsArray() || !info[1].IsArray())
    throw Napi::TypeError::New(env, "execExchanges(recordedKeys, requestKeys)");
  const Napi::Array recorded = info[0].As<Napi::Array>();
  const Napi::Array requests = info[1].As<Napi::Array>();
  ResponsePlan plan;
  for (uint32_t k = 0; k < recorded.Length(); k++) {
    plan.holds_ns.push_back(0);
    plan.request_keys.push_back(recorded.Get(k).As<Napi::Number>().Uint32Value());
  }
  std::vector<bool> used(plan.holds_ns.size(), false);
  Napi::Array out = Napi::Array::New(env, requests.Length());
  for (uint32_t i = 0; i < requests.Length(); i++) {
    const uint32_t k = PickExchange(plan, used, requests.Get(i).As<Napi::Number>().Uint32Value());
    if (k != kNoExchange) used[k] = true;
    out.Set(i, k == kNoExchange ? env.Null() : Napi::Number::New(env, k));
  }
  return out;
}

// execProcSocket(table, text, inode) -> {name, connected}: the name the supervisor gives socket `inode` from
// the text of a /proc/<tid>/net table (a build in another network namespace, pidfd_getfd denied), and
// whether it is connected (then named once); null: not listed.
Napi::Value ExecProcSocket(const Napi::CallbackInfo& info) {
  const Napi::Env env = info.Env();
  if (info.Length() != 3 || !info[0].IsString() || !info[1].IsString() || !info[2].IsNumber())
    throw Napi::TypeError::New(env, "execProcSocket(table, text, inode)");
  SocketFacts facts;
  if (!SocketFactsFromText(info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::String>().Utf8Value(),
                           static_cast<uint64_t>(info[2].As<Napi::Number>().Int64Value()), &facts))
    return env.Null();
  Napi::Object out = Napi::Object::New(env);
  out.Set("name", SocketName(facts));
  out.Set("connected", facts.connected);
  return out;
}

// execSocketTables(protocolName) -> the /proc/<tid>/net tables the supervisor looks for such a socket in.
Napi::Value ExecSocketTables(const Napi::CallbackInfo& info) {
  if (info.Length() != 1 || !info[0].IsString()) throw Napi::TypeError::New(info.Env(), "execSocketTables(name)");
  const std::vector<std::string> names = TableNames(TablesOf(info[0].As<Napi::String>().Utf8Value()));
  Napi::Array out = Napi::Array::New(info.Env(), names.size());
  for (uint32_t i = 0; i < names.size(); i++) out.Set(i, names[i]);
  return out;
}

}  // namespace

void ExportExec(Napi::Env env, Napi::Object exports) {
  exports.Set("ExecSupervisor", ExecSupervisorJs::Define(env));
  exports.Set("execSocketPair", Napi::Function::New(env, ExecSocketPair));
  exports.Set("receiveMessage", Napi::Function::New(env, ReceiveMessage));
  exports.Set("execMatch", Napi::Function::New(env, ExecMatch));
  exports.Set("portKey", Napi::Function::New(env, PortKeyJs));
  exports.Set("execExchanges", Napi::Function::New(env, ExecExchanges));
  exports.Set("execProcSocket", Napi::Function::New(env, ExecProcSocket));
  exports.Set("execSocketTables", Napi::Function::New(env, ExecSocketTables));
}

}  // namespace kreplay
