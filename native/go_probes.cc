#include "go_probes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "capture.h"
#include "native_log.h"

namespace kreplay {

namespace {

// Every key of a map that `wanted` accepts (collected first: deleting while walking would skip keys).
template <typename Key, typename Wanted>
std::vector<Key> KeysOf(bpf_map* map, Wanted wanted) {
  std::vector<Key> keys;
  Key key;
  const Key* prev = nullptr;
  Key last;
  while (bpf_map__get_next_key(map, prev, &key, sizeof(key)) == 0) {
    if (wanted(key)) keys.push_back(key);
    last = key;
    prev = &last;
  }
  return keys;
}

template <typename Key, typename Wanted>
void DeleteKeys(bpf_map* map, Wanted wanted) {
  for (const Key& key : KeysOf<Key>(map, wanted)) bpf_map__delete_elem(map, &key, sizeof(key), 0);
}

std::string Described(const std::string& path, const GoBinary& go) {
  return Named(path) + " (" + (go.version.empty() ? "Go" : go.version) + ")";
}

}  // namespace

void GoProbes::Scan() {
  last_scan_ = std::chrono::steady_clock::now();
  const ProcessScan::Changes changes = processes_.Walk();
  for (const pid_t pid : changes.gone) Forget(pid);
  for (const pid_t pid : changes.started) {
    Binary* binary = BinaryOf(pid);
    if (binary && binary->go.is_go) {
      Mark(pid, binary->go);
    } else {
      // not Go (or gone already): a mark the kernel made at its head read is undone
      Forget(pid);
    }
  }
  // processes the kernel marked and that exited before a walk saw them
  for (const __u32 tgid : KeysOf<__u32>(maps_.processes, [&](__u32 tgid) { return !processes_.Alive(tgid); }))
    Forget(static_cast<pid_t>(tgid));
}

void GoProbes::ScanIfDue() {
  if (std::chrono::steady_clock::now() - last_scan_ >= std::chrono::seconds(1)) Scan();
}

GoProbes::Binary* GoProbes::BinaryOf(pid_t pid) {
  const std::string path = ProcPath(pid, "exe");
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  auto [at, fresh] = binaries_.try_emplace({st.st_dev, st.st_ino});
  Binary& binary = at->second;
  if (!fresh) return &binary;
  binary.go = InspectGoBinary(path);
  if (!binary.go.is_go) return &binary;
  if (binary.go.unfollowed.empty() && Attach(path, binary)) {
    AppendLog("info", "goroutines of " + Described(path, binary.go) + " are followed (g at " +
                          std::to_string(binary.go.tls_offset) + " from the thread pointer" +
                          (binary.go.round_trip ? ", net/http's client pool too)" : ")"));
  } else {
    AppendLog("warn", "goroutines of " + Described(path, binary.go) + " are not followed: " + binary.go.unfollowed +
                          "; its events carry no transaction");
  }
  return &binary;
}

bool GoProbes::Attach(const std::string& path, Binary& binary) {
  const GoBinary& go = binary.go;
  struct Probe {
    bpf_program* prog;
    uint64_t offset;
  };
  std::vector<Probe> probes = {{programs_.newproc1, go.newproc1}};
  for (uint64_t site : go.newproc1_returns) probes.push_back({programs_.newproc1_ret, site});
  if (go.round_trip) {
    probes.push_back({programs_.round_trip, go.round_trip});
    probes.push_back({programs_.read_loop, go.read_loop});
    probes.push_back({programs_.write_loop, go.write_loop});
  }
  for (const Probe& probe : probes) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts);
    bpf_link* link = bpf_program__attach_uprobe_opts(probe.prog, -1, path.c_str(), probe.offset, &opts);
    if (!link) {
      binary.go.unfollowed = std::string("cannot probe it at ") + std::to_string(probe.offset) + ": " +
                             std::strerror(errno);
      for (bpf_link* attached : binary.links) bpf_link__destroy(attached);
      binary.links.clear();
      return false;
    }
    binary.links.push_back(link);
  }
  return true;
}

// Followed: what the kernel kept under this tgid is dropped first (a dead
// process's), then the probes act for it (they act only for a followed
// process). Not followed: every thread runs a goroutine not known.
void GoProbes::Mark(pid_t pid, const GoBinary& go) {
  const __u32 tgid = static_cast<__u32>(pid);
  kr_go_process process = {};
  process.tls_offset = go.tls_offset;
  process.state = go.unfollowed.empty() ? KR_GO_FOLLOWED : KR_GO_UNFOLLOWED;
  __u64 inherited = 0;
  if (bpf_map__lookup_elem(maps_.exec_contexts, &tgid, sizeof(tgid), &inherited, sizeof(inherited), 0) == 0)
    process.inherited = inherited;
  if (process.state == KR_GO_FOLLOWED) Purge(pid);
  if (bpf_map__update_elem(maps_.processes, &tgid, sizeof(tgid), &process, sizeof(process), BPF_ANY) != 0) {
    AppendLog("warn", "Go process " + std::to_string(pid) + " is not marked (the kernel's table is full)");
    return;
  }
  marked_.insert(pid);
  const size_t word = (tgid / 64) % maps_.tgid_words;
  __atomic_fetch_or(&maps_.tgids[word], __u64{1} << (tgid % 64), __ATOMIC_SEQ_CST);
}

void GoProbes::Forget(pid_t pid) {
  const __u32 tgid = static_cast<__u32>(pid);
  kr_go_process process;
  // an exec took the kernel's entry already; the goroutines of the program before it are still kept
  const bool marked = marked_.erase(pid) != 0;
  if (!marked && bpf_map__lookup_elem(maps_.processes, &tgid, sizeof(tgid), &process, sizeof(process), 0) != 0) return;
  const size_t word = (tgid / 64) % maps_.tgid_words;
  __atomic_fetch_and(&maps_.tgids[word], ~(__u64{1} << (tgid % 64)), __ATOMIC_SEQ_CST);
  bpf_map__delete_elem(maps_.processes, &tgid, sizeof(tgid), 0);
  Purge(pid);
}

void GoProbes::Purge(pid_t pid) {
  const __u32 tgid = static_cast<__u32>(pid);
  DeleteKeys<kr_unit_key>(maps_.units,
                          [&](const kr_unit_key& key) { return key.tgid == tgid && key.kind == KR_UNIT_GOROUTINE; });
  DeleteKeys<kr_go_key>(maps_.conns, [&](const kr_go_key& key) { return key.tgid == tgid; });
  DeleteKeys<kr_go_key>(maps_.loops, [&](const kr_go_key& key) { return key.tgid == tgid; });
}

void GoProbes::Detach() {
  for (auto& [file, binary] : binaries_) {
    for (bpf_link* link : binary.links) bpf_link__destroy(link);
    binary.links.clear();
  }
}

}  // namespace kreplay
