#include "capture_session.h"

#include <linux/types.h>
#include <malloc.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "capture.h"
#include "capture_error.h"
#include "js_error.h"

namespace kreplay {

namespace {

// A batch goes to JS when a poll round ends or when it grows past this.
constexpr size_t kBatchBytes = 1u << 20;
// Batches waiting for JS (at most 4 x 1 MiB held, plus the one being filled,
// the one JS decodes and kSpareBatches); when JS falls behind, the poll thread blocks, the
// ring fills up and the kernel counts what it drops. The ring is the buffer
// that absorbs a storm (--ring-buffer-mb); a longer queue here only moved
// memory from the kernel's side to the agent's (issue 14).
constexpr size_t kMaxQueuedBatches = 4;
// Batches kept for reuse once JS is done with them: enough for the one JS decodes and the one
// queued behind it while the poll thread fills the next; past a burst, more are freed.
constexpr size_t kSpareBatches = 2;

uint64_t ReadU64(const Napi::Object& config, const char* key) {
  Napi::Value value = config.Get(key);
  if (value.IsBigInt()) {
    bool lossless;
    return value.As<Napi::BigInt>().Uint64Value(&lossless);
  }
  return static_cast<uint64_t>(value.As<Napi::Number>().Int64Value());
}

std::vector<uint64_t> ReadU64s(const Napi::Array& values) {
  std::vector<uint64_t> out;
  for (uint32_t i = 0; i < values.Length(); i++) {
    bool lossless;
    out.push_back(values.Get(i).As<Napi::BigInt>().Uint64Value(&lossless));
  }
  return out;
}

// { pids: number[], comms: string[], cgroupIds: bigint[] }
FilterSet ReadFilterSet(const Napi::Object& js) {
  FilterSet set;
  Napi::Array pids = js.Get("pids").As<Napi::Array>();
  for (uint32_t i = 0; i < pids.Length(); i++) set.pids.push_back(pids.Get(i).As<Napi::Number>().Uint32Value());
  Napi::Array comms = js.Get("comms").As<Napi::Array>();
  for (uint32_t i = 0; i < comms.Length(); i++) set.comms.push_back(comms.Get(i).As<Napi::String>().Utf8Value());
  set.cgroup_ids = ReadU64s(js.Get("cgroupIds").As<Napi::Array>());
  return set;
}

CaptureConfig ReadConfig(const Napi::Object& js) {
  CaptureConfig config;
  config.ring_bytes = static_cast<uint32_t>(ReadU64(js, "ringBufferBytes"));
  config.wakeup_bytes = ReadU64(js, "wakeupBytes");
  config.self_tgid = static_cast<uint32_t>(ReadU64(js, "selfTgid"));
  Napi::Object filter = js.Get("filter").As<Napi::Object>();
  config.include = ReadFilterSet(filter.Get("include").As<Napi::Object>());
  config.exclude = ReadFilterSet(filter.Get("exclude").As<Napi::Object>());
  config.includes = filter.Get("includes").As<Napi::Boolean>().Value();
  config.cgroup_filter = filter.Get("cgroupFilter").As<Napi::Boolean>().Value();
  config.filter_transactions = filter.Get("transactions").As<Napi::Boolean>().Value();
  config.sample_background = static_cast<uint32_t>(ReadU64(js, "sampleBackground"));
  config.min_duration_ns = ReadU64(js, "minDurationNs");
  config.attribution = js.Get("attribution").As<Napi::Boolean>().Value();
  config.targets = js.Get("targets").As<Napi::Boolean>().Value();
  config.capture_reads = js.Get("captureReads").As<Napi::Boolean>().Value();
  return config;
}

}  // namespace

Napi::Function CaptureSession::Define(Napi::Env env) {
  return DefineClass(env, "CaptureSession",
                     {
                         InstanceMethod("attachPoints", &CaptureSession::AttachPoints),
                         InstanceMethod("readCounters", &CaptureSession::ReadCounters),
                         InstanceMethod("ringFill", &CaptureSession::RingFill),
                         InstanceMethod("programStats", &CaptureSession::ProgramStats),
                         InstanceMethod("setCgroupFilter", &CaptureSession::SetCgroupFilter),
                         InstanceMethod("followLibuv", &CaptureSession::FollowLibuv),
                         InstanceMethod("markJvm", &CaptureSession::MarkJvm),
                         InstanceMethod("processChanges", &CaptureSession::ProcessChanges),
                         InstanceMethod("stop", &CaptureSession::Stop),
                     });
}

CaptureSession::CaptureSession(const Napi::CallbackInfo& info) : Napi::ObjectWrap<CaptureSession>(info) {
  Napi::Env env = info.Env();
  Napi::Object config = info[0].As<Napi::Object>();
  poll_timeout_ms_ = config.Get("pollTimeoutMs").As<Napi::Number>().Int32Value();
  // Full batches are vectors of kBatchBytes. glibc's sliding mmap threshold would serve them
  // from the heap after the first frees and keep a storm's worth in RSS; a
  // fixed threshold maps each one and returns it to the system when freed.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  batch_.reserve(kBatchBytes + 64 * 1024);
  spare_.reserve(kSpareBatches);
  try {
    engine_ = std::make_unique<CaptureEngine>(ReadConfig(config),
                                              [this](const uint8_t* data, size_t size) { Append(data, size); });
  } catch (const CaptureFailure& failure) {
    throw ToJsError(env, failure);
  }
  attach_points_ = engine_->attach_points();
  on_closed_ = Napi::Persistent(info[2].As<Napi::Function>());
  deliver_ = Napi::ThreadSafeFunction::New(
      env, info[1].As<Napi::Function>(), "kreplay-capture", kMaxQueuedBatches, 1, this,
      [](Napi::Env env, void*, CaptureSession* self) { self->Closed(env); }, static_cast<void*>(nullptr));
  // The poll thread uses this object: keep it from being collected until Closed.
  Ref();
  poller_ = std::thread(&CaptureSession::PollLoop, this);
}

CaptureSession::~CaptureSession() {
  stopping_ = true;
  if (poller_.joinable()) poller_.join();
}

void CaptureSession::PollLoop() {
  while (!stopping_.load(std::memory_order_acquire)) {
    int n = engine_->Wait(poll_timeout_ms_);
    if (n < 0 && n != -EINTR) {
      poll_error_ = std::string("polling the ring buffer failed: ") + std::strerror(-n);
      break;
    }
    // The fill before the ring is drained is the one that tells how close it came to dropping.
    NotePeakFill(engine_->RingFill());
    // Below the wake-up threshold the kernel does not wake us: whatever
    // arrived during the poll timeout is picked up here.
    engine_->Consume();
    Deliver();
  }
  // The records up to the stop go to JS before the probes detach: each detach waits for grace
  // periods under the kernel's event_mutex, one tracepoint after another (seconds on a loaded
  // host), and the store commits meanwhile. What the probes record after this is not read.
  engine_->Consume();
  Deliver();
  DeliverDrained();
  engine_->Detach();
  deliver_.Release();
}

// Fails only when the environment is going away; onClosed then stands for it.
void CaptureSession::DeliverDrained() {
  deliver_.BlockingCall(
      static_cast<std::vector<uint8_t>*>(nullptr),
      [](Napi::Env env, Napi::Function on_batch, std::vector<uint8_t>*) { on_batch.Call({env.Null()}); });
}

void CaptureSession::NotePeakFill(double fill) {
  double peak = peak_fill_.load(std::memory_order_relaxed);
  while (fill > peak && !peak_fill_.compare_exchange_weak(peak, fill, std::memory_order_relaxed)) {
  }
}

void CaptureSession::Append(const uint8_t* data, size_t size) {
  uint32_t type;
  std::memcpy(&type, data, sizeof type);
  if (type == KR_RECORD_CONTEXT && size == sizeof(kr_context)) {
    // The kernel reserves a context record whole (KR_CTX_DATA_LEN bytes of data, most of them unused
    // by a head): it goes on up to its valid bytes, rounded up to 8, its size saying so
    // (core/model/record-layout.ts's recordBytes).
    uint32_t len;
    std::memcpy(&len, data + offsetof(kr_context, len), sizeof len);
    const uint32_t trimmed = (offsetof(kr_context, data) + std::min<uint32_t>(len, KR_CTX_DATA_LEN) + 7) & ~uint32_t{7};
    const size_t at = batch_.size();
    batch_.insert(batch_.end(), data, data + trimmed);
    std::memcpy(batch_.data() + at + offsetof(kr_context, size), &trimmed, sizeof trimmed);
  } else {
    batch_.insert(batch_.end(), data, data + size);
  }
  if (batch_.size() >= kBatchBytes) Deliver();
}

std::unique_ptr<std::vector<uint8_t>> CaptureSession::TakeSpare() {
  {
    std::lock_guard<std::mutex> lock(spare_mutex_);
    if (!spare_.empty()) {
      std::unique_ptr<std::vector<uint8_t>> batch = std::move(spare_.back());
      spare_.pop_back();
      return batch;
    }
  }
  auto batch = std::make_unique<std::vector<uint8_t>>();
  batch->reserve(kBatchBytes + 64 * 1024);
  return batch;
}

void CaptureSession::Recycle(std::unique_ptr<std::vector<uint8_t>> batch) {
  batch->clear();
  std::lock_guard<std::mutex> lock(spare_mutex_);
  if (spare_.size() < kSpareBatches) spare_.push_back(std::move(batch));
}

void CaptureSession::Deliver() {
  if (batch_.empty()) return;
  // the filled batch goes to JS as it is; the poll thread goes on in a spare one
  std::unique_ptr<std::vector<uint8_t>> filled = TakeSpare();
  filled->swap(batch_);
  auto* bytes = filled.release();
  napi_status status =
      deliver_.BlockingCall(bytes, [this](Napi::Env env, Napi::Function on_batch, std::vector<uint8_t>* bytes) {
        // The batch is valid during the call only, and it is reused or freed here, right after it.
        // A finalizer would run later: Node defers the frees of external buffers to the event
        // loop's check phase, which a storm's stream of batches (up to 1,000 per turn of the
        // loop) holds off, and 160 MiB of freed batches were seen waiting (issue 14).
        std::unique_ptr<std::vector<uint8_t>> owned(bytes);
        auto buffer = Napi::Buffer<uint8_t>::New(env, owned->data(), owned->size());
        try {
          on_batch.Call({buffer});
        } catch (...) {
          buffer.ArrayBuffer().Detach();
          throw;
        }
        // Detached, no view on it can read the memory once it is reused.
        buffer.ArrayBuffer().Detach();
        Recycle(std::move(owned));
      });
  if (status != napi_ok) {
    // The function is closing (the environment is going away): stop.
    delete bytes;
    stopping_ = true;
  }
}

// Runs on the JS thread once the poll thread released the function and
// every batch it queued has been delivered.
void CaptureSession::Closed(Napi::Env env) {
  stopping_ = true;
  if (poller_.joinable()) poller_.join();
  final_counters_ = engine_->ReadCounters();
  engine_.reset();
  Napi::Value error = env.Undefined();
  if (!poll_error_.empty()) error = ToJsError(env, CaptureFailure("E_CAPTURE_RINGBUF", poll_error_)).Value();
  try {
    on_closed_.Call({error});
  } catch (const Napi::Error& e) {
    e.ThrowAsJavaScriptException();
  }
  on_closed_.Reset();
  Unref();
}

Napi::Value CaptureSession::AttachPoints(const Napi::CallbackInfo& info) {
  Napi::Array out = Napi::Array::New(info.Env(), attach_points_.size());
  for (uint32_t i = 0; i < attach_points_.size(); i++) out.Set(i, attach_points_[i]);
  return out;
}

Napi::Value CaptureSession::ReadCounters(const Napi::CallbackInfo& info) {
  const std::vector<uint64_t> counters = engine_ ? engine_->ReadCounters() : final_counters_;
  Napi::Array out = Napi::Array::New(info.Env(), counters.size());
  for (uint32_t i = 0; i < counters.size(); i++) out.Set(i, Napi::Number::New(info.Env(), counters[i]));
  return out;
}

// The highest fill the poll thread saw since the last call (or now, if higher).
Napi::Value CaptureSession::RingFill(const Napi::CallbackInfo& info) {
  if (!engine_) return Napi::Number::New(info.Env(), 0);
  const double now = engine_->RingFill();
  if (now < 0) return Napi::Number::New(info.Env(), now);
  const double peak = peak_fill_.exchange(0, std::memory_order_relaxed);
  return Napi::Number::New(info.Env(), peak > now ? peak : now);
}

Napi::Value CaptureSession::ProgramStats(const Napi::CallbackInfo& info) {
  const std::vector<kreplay::ProgramStats> stats =
      engine_ ? engine_->ReadProgramStats() : std::vector<kreplay::ProgramStats>{};
  Napi::Array out = Napi::Array::New(info.Env(), stats.size());
  for (uint32_t i = 0; i < stats.size(); i++) {
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("name", stats[i].name);
    o.Set("runTimeNs", Napi::Number::New(info.Env(), static_cast<double>(stats[i].run_time_ns)));
    o.Set("runCount", Napi::Number::New(info.Env(), static_cast<double>(stats[i].run_count)));
    out.Set(i, o);
  }
  return out;
}

// setCgroupFilter(include: bigint[], exclude: bigint[])
void CaptureSession::SetCgroupFilter(const Napi::CallbackInfo& info) {
  if (!engine_) return;
  try {
    engine_->SetCgroupFilter(ReadU64s(info[0].As<Napi::Array>()), ReadU64s(info[1].As<Napi::Array>()));
  } catch (const CaptureFailure& failure) {
    throw ToJsError(info.Env(), failure);
  }
}

// followLibuv(pid): the process's libuv threadpool is followed from now on (uv_probes.h)
void CaptureSession::FollowLibuv(const Napi::CallbackInfo& info) {
  if (info.Length() != 1 || !info[0].IsNumber())
    throw Napi::TypeError::New(info.Env(), "followLibuv(pid) takes a process id");
  if (engine_) engine_->FollowLibuv(info[0].As<Napi::Number>().Int32Value());
}

// markJvm(pid): the process is a JVM, its new threads inherit no request (bpf/capture/tasks.h)
void CaptureSession::MarkJvm(const Napi::CallbackInfo& info) {
  if (info.Length() != 1 || !info[0].IsNumber())
    throw Napi::TypeError::New(info.Env(), "markJvm(pid) takes a process id");
  if (engine_) engine_->MarkJvm(info[0].As<Napi::Number>().Int32Value());
}

// processChanges(): the pids of the processes that started, exec'd or exited since the last call
// (bpf/capture/tasks.h); null when some were lost; undefined when the kernel's pids are not /proc's
Napi::Value CaptureSession::ProcessChanges(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!engine_) return env.Undefined();
  const ProcessEvents::Touched touched = engine_->TakeProcessChanges();
  if (!touched.usable) return env.Undefined();
  if (!touched.complete) return env.Null();
  Napi::Array out = Napi::Array::New(env, touched.pids.size());
  uint32_t i = 0;
  for (const pid_t pid : touched.pids) out.Set(i++, Napi::Number::New(env, pid));
  return out;
}

void CaptureSession::Stop(const Napi::CallbackInfo&) { stopping_.store(true, std::memory_order_release); }

}  // namespace kreplay
