// The kernel side of one capture: the BPF object loaded and attached, and
// the ring buffer its records arrive in. No Node.js in here.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "process_events.h"
#include "process_scan.h"
#include "ring_reader.h"

struct capture;
struct bpf_link;

namespace kreplay {

class TlsProbes;
class GoProbes;
class UvProbes;

// Tasks named by --include or --exclude, as the kernel sees them.
struct FilterSet {
  std::vector<uint32_t> pids;
  std::vector<std::string> comms;
  std::vector<uint64_t> cgroup_ids;
};

struct CaptureConfig {
  uint32_t ring_bytes = 64u << 20;
  uint64_t wakeup_bytes = 1u << 20;
  uint32_t self_tgid = 0;
  FilterSet include;
  FilterSet exclude;
  // An include list is in force (even while empty: its cgroups may come later).
  bool includes = false;
  // The cgroup map is looked up even while empty: SetCgroupFilter fills it later.
  bool cgroup_filter = false;
  bool filter_transactions = false;
  // Keep one in this many writes without a context; 0 or 1: all.
  uint32_t sample_background = 0;
  uint64_t min_duration_ns = 0;
  bool attribution = true;
  bool targets = true;
  // Reads of threads without a context too (--capture-reads).
  bool capture_reads = false;
};

// Called for every record, exactly as the kernel wrote it.
using RecordSink = std::function<void(const uint8_t* data, size_t size)>;

// What the kernel measured of one loaded program (while kernel.bpf_stats_enabled is 1 or a
// BPF_ENABLE_STATS fd is held).
struct ProgramStats {
  std::string name;
  uint64_t run_time_ns = 0;
  uint64_t run_count = 0;
};

class CaptureEngine {
 public:
  // Opens, loads and attaches everything; throws CaptureFailure after
  // undoing whatever it had set up.
  CaptureEngine(const CaptureConfig& config, RecordSink sink);
  ~CaptureEngine();
  CaptureEngine(const CaptureEngine&) = delete;
  CaptureEngine& operator=(const CaptureEngine&) = delete;

  const std::vector<std::string>& attach_points() const { return attach_points_; }

  // Waits up to timeout_ms until records are ready, without consuming them
  // (so the fill can be read first); returns >= 0, or a negative errno.
  int Wait(int timeout_ms);
  // Hands over every record already in the ring without waiting.
  int Consume();

  // Detaches every program: no record arrives after it returns. Slow (RCU
  // grace periods), so it runs on the poll thread, not the JS thread.
  void Detach();

  // Replaces the cgroup ids of the filter (services and cgroup paths resolve
  // to new ids as cgroups come and go); throws CaptureFailure.
  void SetCgroupFilter(const std::vector<uint64_t>& include, const std::vector<uint64_t>& exclude);

  // Follows the libuv threadpool of process `pid` (uv_probes.h); any thread.
  void FollowLibuv(pid_t pid);

  // Marks process `pid` a JVM: its new threads inherit no request (tasks.h); any thread.
  void MarkJvm(pid_t pid);

  // The processes that started, exec'd or exited since the last call, for the runtime hooks'
  // discovery (incomplete: walk /proc); any thread.
  ProcessEvents::Touched TakeProcessChanges();

  // Per-CPU counters summed, indexed by enum kr_counter.
  std::vector<uint64_t> ReadCounters() const;
  // Share of the ring holding unread records, 0..1.
  double RingFill() const;
  // Run time and count of every loaded program, zero unless stats are on (the sysctl, or a BPF_ENABLE_STATS fd).
  std::vector<ProgramStats> ReadProgramStats() const;

 private:
  void Setup(const CaptureConfig& config);
  void FillFilters(const CaptureConfig& config);
  // Opens and configures the skeleton, then loads it; the libbpf error, or 0.
  int Load(const CaptureConfig& config, bool targets);
  void ChoosePrograms(bool attribution);
  void Attach();
  void Teardown();
  // The processes that started (or exec'd) since the last time, to the TLS and Go probes: from the
  // kernel's news of them, or a walk of /proc at the first time, after news was lost, and every
  // kWalkEvery (a safety net).
  void ScanProcesses();

  RecordSink sink_;
  struct capture* skel_ = nullptr;
  std::vector<struct bpf_link*> links_;
  std::unique_ptr<RingReader> ring_;
  std::vector<std::string> attach_points_;
  std::unique_ptr<TlsProbes> tls_;
  std::unique_ptr<GoProbes> go_;
  std::unique_ptr<UvProbes> uv_;
  std::unique_ptr<ProcessEvents> process_events_;
  // the processes the probes were handed
  ProcessScan processes_;
  std::chrono::steady_clock::time_point scanned_{};
  std::chrono::steady_clock::time_point walked_{};
};

}  // namespace kreplay
