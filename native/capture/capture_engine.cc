#include "capture_engine.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <unordered_set>

#include "bpf_links.h"
#include "capture.h"
#include "capture.skel.h"
#include "capture_error.h"
#include "go_probes.h"
#include "kernel_features.h"
#include "native_log.h"
#include "probe_scope.h"
#include "tls_probes.h"
#include "uv_probes.h"

namespace kreplay {

namespace {

// How often the probes are handed the processes started since, and (a safety net: the kernel's news
// of them is exact unless lost, and a loss is counted) how often /proc is walked whatever it said.
constexpr std::chrono::seconds kScanEvery{1};
constexpr std::chrono::seconds kWalkEvery{30};

const char* kTracefsAdvice =
    "kreplay needs a kernel with CONFIG_FTRACE_SYSCALLS and tracefs mounted at /sys/kernel/tracing "
    "(mount -t tracefs nodev /sys/kernel/tracing)";

void CheckConfig(const CaptureConfig& config) {
  const uint32_t page = static_cast<uint32_t>(sysconf(_SC_PAGESIZE));
  const uint32_t ring = config.ring_bytes;
  if (ring < page || ring % page != 0 || (ring & (ring - 1)) != 0) {
    throw CaptureFailure("E_CAPTURE_CONFIG", "ringBufferBytes must be a power of two of at least the page size (" +
                                                 std::to_string(page) + " bytes), got " + std::to_string(ring));
  }
  if (config.wakeup_bytes == 0) throw CaptureFailure("E_CAPTURE_CONFIG", "wakeupBytes must be positive");
  auto at_most = [](size_t n, size_t max, const char* what) {
    if (n > max) {
      throw CaptureFailure("E_CAPTURE_CONFIG", "at most " + std::to_string(max) + " " + what +
                                                   " can be filtered, got " + std::to_string(n));
    }
  };
  at_most(config.include.pids.size() + config.exclude.pids.size(), KR_MAX_FILTER_PIDS, "pids");
  at_most(config.include.comms.size() + config.exclude.comms.size(), KR_MAX_FILTER_COMMS, "comms");
  at_most(config.include.cgroup_ids.size() + config.exclude.cgroup_ids.size(), KR_MAX_FILTER_CGROUPS, "cgroups");
  for (const FilterSet* set : {&config.include, &config.exclude}) {
    for (const std::string& comm : set->comms) {
      if (comm.size() >= KR_COMM_LEN) {
        throw CaptureFailure("E_CAPTURE_CONFIG",
                             "comm filter is longer than " + std::to_string(KR_COMM_LEN - 1) + " bytes: " + comm);
      }
    }
  }
}

// Only the included processes' events can be stored when a transaction's are not kept elsewhere and pids alone are
// included (a comm or cgroup matches processes started later, and a cgroup filter changes while capturing).
ProbeScope ScopeOf(const CaptureConfig& config) {
  if (!config.filter_transactions || !config.includes || config.cgroup_filter || !config.include.comms.empty() ||
      !config.include.cgroup_ids.empty())
    return std::nullopt;
  std::set<pid_t> pids(config.include.pids.begin(), config.include.pids.end());
  for (uint32_t pid : config.exclude.pids) pids.erase(static_cast<pid_t>(pid));
  return pids;
}

void Put(bpf_map* map, const void* key, size_t key_size, __u8 verdict) {
  const int err = bpf_map__update_elem(map, key, key_size, &verdict, sizeof(verdict), BPF_ANY);
  if (err) throw LibbpfFailure(err, "E_CAPTURE_CONFIG", "cannot fill a filter map", "");
}

}  // namespace

CaptureEngine::CaptureEngine(const CaptureConfig& config, RecordSink sink) : sink_(std::move(sink)) {
  try {
    Setup(config);
  } catch (...) {
    Teardown();
    throw;
  }
}

CaptureEngine::~CaptureEngine() { Teardown(); }

void CaptureEngine::Setup(const CaptureConfig& config) {
  CheckConfig(config);
  // Checked first: without privileges tracefs is unreadable, and every
  // tracepoint would look missing.
  if (!HasBpfCapabilities()) throw LibbpfFailure(EPERM, "E_CAPTURE_PERM", "kreplay lacks privileges", "");
  int err = Load(config, config.targets);
  if (err && config.targets) {
    // Older kernels cannot verify the target code (read-only casts of kernel pointers): capture without it.
    AppendLog("warn", "this kernel refused the programs that resolve write targets; capturing without targets");
    capture__destroy(skel_);
    skel_ = nullptr;
    err = Load(config, false);
  }
  if (err) {
    throw LibbpfFailure(err, "E_CAPTURE_LOAD", "the kernel refused kreplay's BPF programs",
                        "the libbpf lines logged just before this error give the verifier's reason");
  }
  FillFilters(config);
  Attach();
  if (config.attribution) {
    // before the first walk: a process started after the programs were attached is in the walk or the news
    process_events_ =
        std::make_unique<ProcessEvents>(bpf_map__fd(skel_->maps.proc_events),
                                        bpf_map__max_entries(skel_->maps.proc_events), &skel_->bss->proc_events_lost);
    auto& p = skel_->progs;
    const ProbeScope scope = ScopeOf(config);
    tls_ = std::make_unique<TlsProbes>(TlsPrograms{p.ssl_read_enter, p.ssl_read_exit, p.ssl_read_ex_enter,
                                                   p.ssl_read_ex_exit, p.ssl_write_enter, p.ssl_write_ex_enter},
                                       scope);
#if defined(__x86_64__)
    auto& m = skel_->maps;
    go_ = std::make_unique<GoProbes>(
        GoPrograms{p.go_newproc1, p.go_newproc1_runnable, p.go_newproc1_ret, p.go_round_trip, p.go_conn_write,
                   p.go_read_loop, p.go_h2_headers, p.go_tls_read, p.go_tls_read_ret, p.go_chansend, p.go_chanrecv,
                   p.go_chanrecv_ret, p.go_chanrecv1_ret, p.go_chanrecv2_ret},
        GoMaps{m.go_binaries, m.go_processes, m.exec_contexts, m.units, m.go_conns, m.go_streams, m.go_tls_reads,
               skel_->bss->go_tgids, sizeof(skel_->bss->go_tgids) / sizeof(skel_->bss->go_tgids[0])},
        scope);
#endif
    uv_ = std::make_unique<UvProbes>(UvPrograms{p.uv_work_submit, p.uv_queue_work, p.uv_work_start});
    ScanProcesses();
  }

  ring_ = std::make_unique<RingReader>(bpf_map__fd(skel_->maps.events), bpf_map__max_entries(skel_->maps.events));
}

int CaptureEngine::Load(const CaptureConfig& config, bool targets) {
  skel_ = capture__open();
  if (!skel_) throw LibbpfFailure(errno, "E_CAPTURE_LOAD", "cannot open kreplay's BPF object", "");

  auto* ro = skel_->rodata;
  ro->self_tgid = config.self_tgid;
  ro->filter_by_pid = !config.include.pids.empty() || !config.exclude.pids.empty();
  ro->filter_by_comm = !config.include.comms.empty() || !config.exclude.comms.empty();
  ro->filter_by_cgroup =
      config.cgroup_filter || !config.include.cgroup_ids.empty() || !config.exclude.cgroup_ids.empty();
  ro->filter_includes = config.includes;
  ro->filter_transactions = config.filter_transactions;
  ro->sample_background = config.sample_background;
  ro->min_duration_ns = config.min_duration_ns;
  ro->wakeup_data_bytes = config.wakeup_bytes;
  ro->attribution_enabled = config.attribution;
  ro->targets_enabled = targets;
  ro->capture_reads = config.capture_reads;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  ro->capture_started_ns = static_cast<__u64>(now.tv_sec) * 1000000000ULL + static_cast<__u64>(now.tv_nsec);

  int err = bpf_map__set_max_entries(skel_->maps.events, config.ring_bytes);
  if (err) throw LibbpfFailure(err, "E_CAPTURE_RINGBUF", "cannot size the ring buffer", "");
  ChoosePrograms(config.attribution);
  // The verifier gives up with EAGAIN when a signal is pending, and a profiler's
  // SIGPROF (node --cpu-prof) arrives every millisecond: hold it until loaded.
  sigset_t profiling, previous;
  sigemptyset(&profiling);
  sigaddset(&profiling, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &profiling, &previous);
  err = capture__load(skel_);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return err;
}

// Before attaching: no write passes the filters before they are complete.
void CaptureEngine::FillFilters(const CaptureConfig& config) {
  auto& maps = skel_->maps;
  const std::pair<const FilterSet*, __u8> sets[] = {{&config.include, KR_FILTER_INCLUDE},
                                                    {&config.exclude, KR_FILTER_EXCLUDE}};
  for (const auto& [set, verdict] : sets) {
    for (uint32_t pid : set->pids) Put(maps.filter_pids, &pid, sizeof(pid), verdict);
    for (const std::string& comm : set->comms) {
      char key[KR_COMM_LEN] = {};
      std::memcpy(key, comm.data(), comm.size());
      Put(maps.filter_comms, key, sizeof(key), verdict);
    }
  }
  SetCgroupFilter(config.include.cgroup_ids, config.exclude.cgroup_ids);
}

void CaptureEngine::SetCgroupFilter(const std::vector<uint64_t>& include, const std::vector<uint64_t>& exclude) {
  if (include.size() + exclude.size() > KR_MAX_FILTER_CGROUPS) {
    throw CaptureFailure("E_CAPTURE_CONFIG", "at most " + std::to_string(KR_MAX_FILTER_CGROUPS) +
                                                 " cgroups can be filtered, got " +
                                                 std::to_string(include.size() + exclude.size()));
  }
  bpf_map* map = skel_->maps.filter_cgroups;
  std::vector<uint64_t> stale;
  uint64_t key = 0;
  const uint64_t* prev = nullptr;
  while (bpf_map__get_next_key(map, prev, &key, sizeof(key)) == 0) {
    stale.push_back(key);
    prev = &stale.back();
  }
  // Written before the stale ones go, so a cgroup in both sets is never missing meanwhile;
  // an id excluded as well as included is excluded.
  for (uint64_t id : include) Put(map, &id, sizeof(id), KR_FILTER_INCLUDE);
  for (uint64_t id : exclude) Put(map, &id, sizeof(id), KR_FILTER_EXCLUDE);
  std::unordered_set<uint64_t> kept(include.begin(), include.end());
  kept.insert(exclude.begin(), exclude.end());
  for (uint64_t id : stale) {
    if (!kept.count(id)) bpf_map__delete_elem(map, &id, sizeof(id), 0);
  }
}

// Turns off the programs whose attach point this kernel lacks, or fails
// when one kreplay cannot do without is missing.
void CaptureEngine::ChoosePrograms(bool attribution) {
  KernelFeatures kernel;
  auto& p = skel_->progs;
  auto has = [&](bpf_program* prog) { return kernel.HasAttachPoint(bpf_program__section_name(prog)); };
  auto require = [&](bpf_program* prog, const std::string& advice) {
    if (!has(prog)) {
      throw CaptureFailure("E_CAPTURE_NO_TRACEPOINT",
                           std::string(bpf_program__section_name(prog)) + " is missing in this kernel; " + advice);
    }
  };

  struct Call {
    const char* name;
    bpf_program* enter;
    bpf_program* exit;
  } calls[] = {
      {"write", p.sys_enter_write, p.sys_exit_write},
      {"writev", p.sys_enter_writev, p.sys_exit_writev},
      {"pwrite64", p.sys_enter_pwrite64, p.sys_exit_pwrite64},
      {"pwritev", p.sys_enter_pwritev, p.sys_exit_pwritev},
      {"pwritev2", p.sys_enter_pwritev2, p.sys_exit_pwritev2},
      {"sendto", p.sys_enter_sendto, p.sys_exit_sendto},
      {"sendmsg", p.sys_enter_sendmsg, p.sys_exit_sendmsg},
      {"sendmmsg", p.sys_enter_sendmmsg, p.sys_exit_sendmmsg},
      {"sendfile", p.sys_enter_sendfile64, p.sys_exit_sendfile64},
      {"read", p.sys_enter_read, p.sys_exit_read},
      {"readv", p.sys_enter_readv, p.sys_exit_readv},
      {"pread64", p.sys_enter_pread64, p.sys_exit_pread64},
      {"preadv", p.sys_enter_preadv, p.sys_exit_preadv},
      {"preadv2", p.sys_enter_preadv2, p.sys_exit_preadv2},
      {"recvfrom", p.sys_enter_recvfrom, p.sys_exit_recvfrom},
      {"recvmsg", p.sys_enter_recvmsg, p.sys_exit_recvmsg},
      {"recvmmsg", p.sys_enter_recvmmsg, p.sys_exit_recvmmsg},
      {"fsync", p.sys_enter_fsync, p.sys_exit_fsync},
      {"fdatasync", p.sys_enter_fdatasync, p.sys_exit_fdatasync},
      {"sync_file_range", p.sys_enter_sync_file_range, p.sys_exit_sync_file_range},
      {"syncfs", p.sys_enter_syncfs, p.sys_exit_syncfs},
      {"connect", p.sys_enter_connect, p.sys_exit_connect},
  };
  require(calls[0].enter, kTracefsAdvice);
  require(calls[0].exit, kTracefsAdvice);
  // where the Node hook's signals are read (bpf/capture/heads.h): a hook that lost them would run unattributed
  require(p.sys_enter_getpriority, kTracefsAdvice);
  for (const auto& call : calls) {
    if (has(call.enter) && has(call.exit)) continue;
    bpf_program__set_autoload(call.enter, false);
    bpf_program__set_autoload(call.exit, false);
    AppendLog("warn", std::string(call.name) + "(2) is not traced: its syscall tracepoints are missing");
  }
  // Without it a TCP connect is timed by the call alone (a non-blocking one not at all).
  if (!has(p.inet_sock_set_state)) {
    bpf_program__set_autoload(p.inet_sock_set_state, false);
    AppendLog("warn", "sock:inet_sock_set_state is missing: TCP connects are timed by the connect call alone");
  }

  const char* sched_advice = "kreplay needs BTF-enabled scheduler tracepoints (Linux 5.5 or newer)";
  const char* block_advice = "kreplay needs the block layer's tracepoints (CONFIG_BLOCK, Linux 5.11 or newer)";
  require(p.sched_process_exit, sched_advice);
  require(p.task_rename, sched_advice);
  if (attribution) {
    require(p.sched_process_fork, sched_advice);
  } else {
    bpf_program__set_autoload(p.sched_process_fork, false);
  }
  require(p.block_rq_issue, block_advice);
  require(p.block_rq_complete, block_advice);
  // Linux 6.5+ reports each request once at block_io_start; before, the
  // insert hook plus the issue hook (direct issue skips insert) stand in.
  const bool io_start = has(p.block_io_start);
  skel_->rodata->issue_creates_request = !io_start;
  if (io_start || !has(p.block_rq_insert)) bpf_program__set_autoload(p.block_rq_insert, false);
  if (!io_start) {
    bpf_program__set_autoload(p.block_io_start, false);
    AppendLog("info", "block_io_start is missing: block requests are tracked from insert and issue");
  }
}

void CaptureEngine::Attach() {
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) {
    // resolve_target runs by tail call only (resolve_targets), attached nowhere;
    // the uprobes (Owns: by section) go to the binaries their scanners find (TlsProbes, GoProbes, UvProbes)
    if (!bpf_program__autoload(prog) || prog == skel_->progs.resolve_target || TlsProbes::Owns(prog)) continue;
    const char* section = bpf_program__section_name(prog);
    bpf_link* link = bpf_program__attach(prog);
    if (!link) throw LibbpfFailure(errno, "E_CAPTURE_ATTACH", std::string("cannot attach to ") + section, "");
    links_.push_back(link);
    attach_points_.push_back(section);
  }
}

void CaptureEngine::Detach() {
  std::vector<bpf_link*> links = std::move(links_);
  links_.clear();
  // every group's links at once: each detach waits for a grace period, in parallel they share it
  for (std::vector<bpf_link*> probes :
       {tls_ ? tls_->TakeLinks() : std::vector<bpf_link*>{}, go_ ? go_->TakeLinks() : std::vector<bpf_link*>{},
        uv_ ? uv_->TakeLinks() : std::vector<bpf_link*>{}})
    links.insert(links.end(), probes.begin(), probes.end());
  DestroyLinks(links);
}

void CaptureEngine::Teardown() {
  Detach();
  process_events_.reset();
  tls_.reset();
  go_.reset();
  uv_.reset();
  ring_.reset();
  capture__destroy(skel_);
  skel_ = nullptr;
}

// The poll thread's turn is also when newly started programs get their TLS and Go probes.
int CaptureEngine::Wait(int timeout_ms) {
  if (process_events_ && std::chrono::steady_clock::now() - scanned_ >= kScanEvery) ScanProcesses();
  return ring_->Wait(timeout_ms);
}

void CaptureEngine::ScanProcesses() {
  const auto now = std::chrono::steady_clock::now();
  scanned_ = now;
  // taken before the walk or the looks: what touches a process later is in the next take
  ProcessEvents::Touched touched = process_events_->Take(ProcessEvents::kProbes);
  const bool walk =
      !touched.complete || walked_ == std::chrono::steady_clock::time_point{} || now - walked_ >= kWalkEvery;
  if (walk) walked_ = now;
  const ProcessScan::Changes changes = walk ? processes_.Walk() : processes_.Update(touched.pids);
  if (tls_) tls_->Scan(changes);
  if (go_) go_->Scan(changes, processes_);
}

ProcessEvents::Touched CaptureEngine::TakeProcessChanges() {
  return process_events_ ? process_events_->Take(ProcessEvents::kHooks) : ProcessEvents::Touched{};
}

void CaptureEngine::FollowLibuv(pid_t pid) {
  if (uv_) uv_->Follow(pid);
}

void CaptureEngine::MarkJvm(pid_t pid) {
  const __u32 tgid = static_cast<__u32>(pid);
  const __u8 jvm = 1;
  if (bpf_map__update_elem(skel_->maps.jvm_processes, &tgid, sizeof(tgid), &jvm, sizeof(jvm), BPF_ANY) != 0)
    AppendLog("warn", "JVM " + std::to_string(pid) +
                          " not marked (the table is full or the process gone): its new threads may inherit a request");
}

int CaptureEngine::Consume() { return ring_->Consume(sink_); }

std::vector<uint64_t> CaptureEngine::ReadCounters() const {
  const int cpus = libbpf_num_possible_cpus();
  std::vector<uint64_t> sums(KR_COUNTER_MAX, 0);
  if (cpus <= 0) return sums;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
  for (__u32 key = 0; key < KR_COUNTER_MAX; key++) {
    if (bpf_map__lookup_elem(skel_->maps.counters, &key, sizeof(key), per_cpu.data(), per_cpu.size() * sizeof(uint64_t),
                             0) != 0) {
      continue;
    }
    for (uint64_t v : per_cpu) sums[key] += v;
  }
  return sums;
}

std::vector<ProgramStats> CaptureEngine::ReadProgramStats() const {
  std::vector<ProgramStats> out;
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) {
    bpf_prog_info info = {};
    __u32 len = sizeof(info);
    const int fd = bpf_program__fd(prog);
    if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) != 0) continue;
    out.push_back({bpf_program__name(prog), info.run_time_ns, info.run_cnt});
  }
  return out;
}

double CaptureEngine::RingFill() const { return ring_ ? ring_->Fill() : -1; }

}  // namespace kreplay
