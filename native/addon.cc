// kreplay_native: the kernel capture and the host facts it depends on, and the
// supervisor of `kreplay replay --exec`.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <malloc.h>
#include <napi.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "capture_error.h"
#include "capture_session.h"
#include "clock_set_watch.h"
#include "doorbell_watch.h"
#include "elf_symbols.h"
#include "exec_binding.h"
#include "file_lock.h"
#include "host_clock.h"
#include "inspector_guard.h"
#include "js_error.h"
#include "native_log.h"
#include "py_inject.h"
#include "request_key.h"
#include "request_keys_binding.h"
#include "sock_diag.h"
#include "thread_scheduling.h"
#include "tracefs.h"

namespace kreplay {

namespace {

Napi::Value ClockOffsetJs(const Napi::CallbackInfo& info) {
  const ClockOffset clock = MeasureClockOffset();
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("offsetNs", Napi::BigInt::New(info.Env(), clock.offset_ns));
  out.Set("errorNs", Napi::Number::New(info.Env(), static_cast<double>(clock.error_ns)));
  return out;
}

Napi::Value EnsureTracefsJs(const Napi::CallbackInfo& info) {
  try {
    return Napi::Boolean::New(info.Env(), EnsureTracefs());
  } catch (const CaptureFailure& failure) {
    throw ToJsError(info.Env(), failure);
  }
}

// [[level, text], ...] collected since the last call.
Napi::Value DrainLogJs(const Napi::CallbackInfo& info) {
  const auto lines = DrainLog();
  Napi::Array out = Napi::Array::New(info.Env(), lines.size());
  for (uint32_t i = 0; i < lines.size(); i++) {
    Napi::Array line = Napi::Array::New(info.Env(), 2);
    line.Set(0u, lines[i].first);
    line.Set(1u, lines[i].second);
    out.Set(i, line);
  }
  return out;
}

// setRealtimeScheduling(tid, priority)
Napi::Value SetRealtimeSchedulingJs(const Napi::CallbackInfo& info) {
  if (info.Length() != 2 || !info[0].IsNumber() || !info[1].IsNumber())
    throw Napi::TypeError::New(info.Env(), "setRealtimeScheduling(tid, priority) takes two numbers");
  try {
    SetRealtimeScheduling(info[0].As<Napi::Number>().Int32Value(), info[1].As<Napi::Number>().Int32Value());
  } catch (const NativeFailure& failure) {
    throw ToJsError(info.Env(), failure);
  }
  return info.Env().Undefined();
}

// setShortestSlice(tid) -> whether the fair scheduler gave thread `tid` its shortest slice (its
// own: threads it starts later begin at the defaults); false where the kernel keeps its default
// (no custom slices before Linux 6.12, or not SCHED_OTHER)
Napi::Value SetShortestSliceJs(const Napi::CallbackInfo& info) {
  if (info.Length() != 1 || !info[0].IsNumber())
    throw Napi::TypeError::New(info.Env(), "setShortestSlice(tid) takes a number");
  const int32_t tid = info[0].As<Napi::Number>().Int32Value();
  if (tid <= 0) throw ToJsError(info.Env(), SchedulingFailure("E_SCHED", "no thread id " + std::to_string(tid)));
  return Napi::Boolean::New(info.Env(), SetShortestSlice(tid, true));
}

// tcpListeners() -> the TCP sockets listening in the agent's network namespace, [{inode, port,
// loopback}], or null when sock_diag cannot say. It walks the listening table alone, where a read
// of /proc/net/tcp{,6} formats every connection of the host as text (milliseconds on a busy one).
Napi::Value TcpListenersJs(const Napi::CallbackInfo& info) {
  const Napi::Env env = info.Env();
  Napi::Array out = Napi::Array::New(env);
  uint32_t n = 0;
  for (const int family : {AF_INET, AF_INET6}) {
    const int found = DiagFind(family, IPPROTO_TCP, 1u << TCP_LISTEN, [&](const inet_diag_msg& msg) {
      const auto* a = reinterpret_cast<const uint8_t*>(msg.id.idiag_src);
      // 127.0.0.0/8, ::1, or ::ffff:127.0.0.0/104
      const bool zeros64 = msg.id.idiag_src[0] == 0 && msg.id.idiag_src[1] == 0;
      const bool loopback = family == AF_INET
                                ? a[0] == 127
                                : zeros64 && ((msg.id.idiag_src[2] == 0 && msg.id.idiag_src[3] == htonl(1)) ||
                                              (msg.id.idiag_src[2] == htonl(0xffff) && a[12] == 127));
      Napi::Object socket = Napi::Object::New(env);
      socket.Set("inode", Napi::Number::New(env, static_cast<double>(msg.idiag_inode)));
      socket.Set("port", Napi::Number::New(env, ntohs(msg.id.idiag_sport)));
      socket.Set("loopback", Napi::Boolean::New(env, loopback));
      out.Set(n++, socket);
      return false;
    });
    if (found < 0) return env.Null();
  }
  return out;
}

// doorbellPipe() -> [readFd, writeFd]
Napi::Value DoorbellPipeJs(const Napi::CallbackInfo& info) {
  try {
    const PipeEnds ends = MakeDoorbellPipe();
    Napi::Array out = Napi::Array::New(info.Env(), 2);
    out.Set(0u, ends.read_fd);
    out.Set(1u, ends.write_fd);
    return out;
  } catch (const NativeFailure& failure) {
    throw ToJsError(info.Env(), failure);
  }
}

// duplicateFd(fd) -> a close-on-exec copy of fd
Napi::Value DuplicateFdJs(const Napi::CallbackInfo& info) {
  if (info.Length() != 1 || !info[0].IsNumber())
    throw Napi::TypeError::New(info.Env(), "duplicateFd(fd) takes a descriptor number");
  try {
    return Napi::Number::New(info.Env(), DuplicateFd(info[0].As<Napi::Number>().Int32Value()));
  } catch (const NativeFailure& failure) {
    throw ToJsError(info.Env(), failure);
  }
}

// lockFileExclusive(path) -> the descriptor holding an exclusive flock on path (file_lock.h)
Napi::Value LockFileExclusiveJs(const Napi::CallbackInfo& info) {
  if (info.Length() != 1 || !info[0].IsString())
    throw Napi::TypeError::New(info.Env(), "lockFileExclusive(path) takes a path");
  try {
    return Napi::Number::New(info.Env(), LockFileExclusive(info[0].As<Napi::String>().Utf8Value()));
  } catch (const NativeFailure& failure) {
    throw ToJsError(info.Env(), failure);
  }
}

// unlockFile(fd): closes a descriptor lockFileExclusive gave (file_lock.h)
Napi::Value UnlockFileJs(const Napi::CallbackInfo& info) {
  if (info.Length() != 1 || !info[0].IsNumber())
    throw Napi::TypeError::New(info.Env(), "unlockFile(fd) takes a descriptor number");
  try {
    UnlockFile(info[0].As<Napi::Number>().Int32Value());
  } catch (const NativeFailure& failure) {
    throw ToJsError(info.Env(), failure);
  }
  return info.Env().Undefined();
}

// trimMemory(): gives the heap's free pages back to the kernel (malloc_trim); the bytes it freed
// stay Node's to reuse otherwise, so a daemon's RSS would keep its peak after a burst of load.
Napi::Value TrimMemoryJs(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), malloc_trim(0) == 1); }

// requestKey(bytes) / requestShape(bytes): what a request's first bytes ask (request_key.h), for the
// agent's store and for tests; the relay computes the same from the build's bytes.
const uint8_t* RequestBytes(const Napi::CallbackInfo& info, size_t* len) {
  if (info.Length() != 1 || !info[0].IsTypedArray())
    throw Napi::TypeError::New(info.Env(), "requestKey/requestShape(bytes) take a Uint8Array");
  auto bytes = info[0].As<Napi::Uint8Array>();
  *len = bytes.ElementLength();
  return bytes.Data();
}

Napi::Value RequestKeyJs(const Napi::CallbackInfo& info) {
  size_t len;
  const uint8_t* data = RequestBytes(info, &len);
  return Napi::Number::New(info.Env(), RequestKey(data, len));
}

Napi::Value RequestShapeJs(const Napi::CallbackInfo& info) {
  size_t len;
  const uint8_t* data = RequestBytes(info, &len);
  return Napi::String::New(info.Env(), RequestShape(data, len));
}

// hasBpfCapabilities(): the one check of load privileges, shared with LibbpfFailure.
Napi::Value HasBpfCapabilitiesJs(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), HasBpfCapabilities());
}

// enableBpfStats(): an fd that keeps the kernel's per-program run-time statistics on until it is
// closed; unlike the sysctl, holders do not undo one another.
Napi::Value EnableBpfStatsJs(const Napi::CallbackInfo& info) {
  const int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (fd < 0)
    throw ToJsError(info.Env(), LibbpfFailure(fd, "E_CAPTURE_STATS", "cannot enable BPF run-time statistics", ""));
  return Napi::Number::New(info.Env(), fd);
}

// libbpfVersion(): the libbpf this addon runs with (the shared library's, which may be newer
// than the headers it was built against), for `kreplay --version`.
Napi::Value LibbpfVersionJs(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), libbpf_version_string());
}

// elfSymbols(path, names, dynamicOnly?) -> { relocatable, values: { name: bigint } } of the names
// the ELF file defines, or null when it is not a readable ELF file (elf_symbols.h).
Napi::Value ElfSymbolsJs(const Napi::CallbackInfo& info) {
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsArray())
    throw Napi::TypeError::New(info.Env(), "elfSymbols(path, names, dynamicOnly?) takes a path and an array of names");
  std::set<std::string> wanted;
  Napi::Array names = info[1].As<Napi::Array>();
  for (uint32_t i = 0; i < names.Length(); i++) wanted.insert(names.Get(i).ToString().Utf8Value());
  const bool dynamic_only = info.Length() > 2 && info[2].ToBoolean().Value();
  const ElfSymbols elf = ReadElfSymbols(info[0].As<Napi::String>().Utf8Value(), wanted, dynamic_only);
  if (!elf.valid) return info.Env().Null();
  Napi::Object values = Napi::Object::New(info.Env());
  for (const auto& [name, value] : elf.values) values.Set(name, Napi::BigInt::New(info.Env(), value));
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("relocatable", Napi::Boolean::New(info.Env(), elf.relocatable));
  out.Set("values", values);
  return out;
}

}  // namespace

}  // namespace kreplay

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  using namespace kreplay;
  InstallLibbpfLog();
  exports.Set("CaptureSession", CaptureSession::Define(env));
  exports.Set("InspectorGuard", DefineInspectorGuard(env));
  exports.Set("clockOffset", Napi::Function::New(env, ClockOffsetJs));
  exports.Set("ClockSetWatch", DefineClockSetWatch(env));
  exports.Set("ensureTracefs", Napi::Function::New(env, EnsureTracefsJs));
  exports.Set("drainLog", Napi::Function::New(env, DrainLogJs));
  exports.Set("setRealtimeScheduling", Napi::Function::New(env, SetRealtimeSchedulingJs));
  exports.Set("setShortestSlice", Napi::Function::New(env, SetShortestSliceJs));
  exports.Set("shortestSliceNs", Napi::Number::New(env, static_cast<double>(kShortestSliceNs)));
  exports.Set("tcpListeners", Napi::Function::New(env, TcpListenersJs));
  exports.Set("doorbellPipe", Napi::Function::New(env, DoorbellPipeJs));
  exports.Set("DoorbellWatch", DefineDoorbellWatch(env));
  exports.Set("duplicateFd", Napi::Function::New(env, DuplicateFdJs));
  exports.Set("lockFileExclusive", Napi::Function::New(env, LockFileExclusiveJs));
  exports.Set("unlockFile", Napi::Function::New(env, UnlockFileJs));
  exports.Set("trimMemory", Napi::Function::New(env, TrimMemoryJs));
  exports.Set("requestKey", Napi::Function::New(env, RequestKeyJs));
  exports.Set("requestShape", Napi::Function::New(env, RequestShapeJs));
  exports.Set("hasBpfCapabilities", Napi::Function::New(env, HasBpfCapabilitiesJs));
  exports.Set("enableBpfStats", Napi::Function::New(env, EnableBpfStatsJs));
  exports.Set("libbpfVersion", Napi::Function::New(env, LibbpfVersionJs));
  exports.Set("elfSymbols", Napi::Function::New(env, ElfSymbolsJs));
  ExportExec(env, exports);
  ExportRequestKeys(env, exports);
  ExportPyInject(env, exports);
  return exports;
}

NODE_API_MODULE(kreplay_native, Init)
