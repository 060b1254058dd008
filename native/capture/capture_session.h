// The JS object of a running capture: a thread polls the ring buffer and
// hands the records to JS in batches, one Buffer per batch.
#pragma once

#include <napi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capture_engine.h"

namespace kreplay {

class CaptureSession : public Napi::ObjectWrap<CaptureSession> {
 public:
  static Napi::Function Define(Napi::Env env);

  // new CaptureSession(config, onBatch(buffer | null), onClosed(error?)): onBatch(null) says the
  // records up to the stop are all delivered, before the probes detach
  explicit CaptureSession(const Napi::CallbackInfo& info);
  ~CaptureSession() override;

 private:
  Napi::Value AttachPoints(const Napi::CallbackInfo& info);
  Napi::Value ReadCounters(const Napi::CallbackInfo& info);
  Napi::Value RingFill(const Napi::CallbackInfo& info);
  Napi::Value ProgramStats(const Napi::CallbackInfo& info);
  void SetCgroupFilter(const Napi::CallbackInfo& info);
  void FollowLibuv(const Napi::CallbackInfo& info);
  void MarkJvm(const Napi::CallbackInfo& info);
  Napi::Value ProcessChanges(const Napi::CallbackInfo& info);
  void Stop(const Napi::CallbackInfo& info);

  void PollLoop();
  void Append(const uint8_t* data, size_t size);
  void NotePeakFill(double fill);
  void Deliver();
  void DeliverDrained();
  std::unique_ptr<std::vector<uint8_t>> TakeSpare();
  void Recycle(std::unique_ptr<std::vector<uint8_t>> batch);
  void Closed(Napi::Env env);

  std::unique_ptr<CaptureEngine> engine_;
  std::vector<std::string> attach_points_;
  std::vector<uint64_t> final_counters_;
  Napi::ThreadSafeFunction deliver_;
  Napi::FunctionReference on_closed_;
  std::thread poller_;
  std::atomic<bool> stopping_{false};
  std::atomic<double> peak_fill_{0};
  int poll_timeout_ms_ = 100;
  // Touched by the poll thread only, until it has been joined.
  std::vector<uint8_t> batch_;
  std::string poll_error_;
  // Batches JS is done with, kept for the poll thread to fill again (at most kSpareBatches): a
  // fresh 1 MiB batch was a fresh mapping, its pages faulted in one by one and unmapped after.
  std::mutex spare_mutex_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> spare_;
};

}  // namespace kreplay
