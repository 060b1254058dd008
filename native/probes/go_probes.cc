#include "go_probes.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstring>

#include "bpf_links.h"
#include "capture.h"
#include "native_log.h"

namespace kreplay {

namespace {

// Every key of a map that `wanted` accepts, read a batch of buckets at a time: a walk by
// get_next_key starts over whenever the key it stands on goes, which on a map the kernel keeps
// changing (goroutines come and go) may never end.
// False when the map could not be read whole.
template <typename Key, typename Wanted>
bool KeysOf(bpf_map* map, Wanted wanted, std::vector<Key>* found) {
  const int fd = bpf_map__fd(map);
  size_t room = 1024;
  std::vector<Key> keys(room);
  std::vector<char> values(room * bpf_map__value_size(map));
  // the hash maps' batch cursor is a bucket index
  __u64 in = 0, out = 0;
  void* from = nullptr;
  for (;;) {
    __u32 count = static_cast<__u32>(room);
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    const int err = bpf_map_lookup_batch(fd, from, &out, keys.data(), values.data(), &count, &opts);
    if (err && errno == ENOSPC && count == 0) {
      // one bucket holds more than there is room for
      room *= 2;
      keys.resize(room);
      values.resize(room * bpf_map__value_size(map));
      continue;
    }
    for (__u32 i = 0; i < count; i++) {
      if (wanted(keys[i])) found->push_back(keys[i]);
    }
    // ENOENT: the last bucket was read
    if (err) return errno == ENOENT;
    in = out;
    from = &in;
  }
}

template <typename Key, typename Wanted>
bool DeleteKeys(bpf_map* map, Wanted wanted) {
  std::vector<Key> keys;
  const bool whole = KeysOf<Key>(map, wanted, &keys);
  for (const Key& key : keys) bpf_map__delete_elem(map, &key, sizeof(key), 0);
  return whole;
}

std::string Described(const std::string& path, const GoBinary& go) {
  return Named(path) + " (" + (go.version.empty() ? "Go" : go.version) + ")";
}

// The line saying what of a followed binary's goroutines is seen; `where`: "" on the whole host.
std::string Following(const std::string& path, const GoBinary& go, const std::string& where) {
  return "goroutines of " + Described(path, go) + " are followed" + where + " (g at " + std::to_string(go.tls_offset) +
         " from the thread pointer" + (go.round_trip ? ", net/http's client pool too" : "") +
         (go.h2_headers ? ", HTTP/2 server streams too" : "") + (go.tls_read ? ", TLS server reads too" : "") +
         (go.chanrecv ? ", channel hand-offs too" : "") +
         (go.layout.m_curg ? "" : "; no DWARF to find a goroutine's creator in: newproc1's entry is probed too") +
         (go.newproc1_runnable ? ")"
                               : "; newproc1's casgstatus(newg, _Gdead, _Grunnable) call is not found: its RETs are "
                                 "probed, single-stepped by the kernel at each goroutine's start)");
}

}  // namespace

void GoProbes::Scan(const ProcessScan::Changes& changes, const ProcessScan& processes) {
  // the processes marked here that exited, or exec'd: the kernel marked the new program unfollowed
  // (the old one's goroutines are still kept), and it is followed below once they are dropped
  for (const pid_t pid : changes.gone) {
    Unprobe(pid);
    if (!marked_.count(pid)) continue;
    if (!processes.Alive(pid)) {
      Forget(pid);
      continue;
    }
    marked_.erase(pid);
    forgotten_.insert(static_cast<__u32>(pid));
  }
  struct Found {
    pid_t pid;
    const GoBinary* go;
    bool probed;
  };
  std::vector<Found> found;
  for (const pid_t pid : changes.started) {
    // out of scope: its events are not stored, and a Go process the kernel finds is marked unfollowed (go_detect)
    if (!InScope(scope_, pid)) continue;
    const Binary* binary = BinaryOf(pid);
    if (binary && binary->go.is_go) {
      found.push_back({pid, &binary->go, scope_ ? AttachTo(pid, binary->go) : binary->go.unfollowed.empty()});
    } else {
      // not Go (or gone already): a mark the kernel made at a head read is undone
      Forget(pid);
    }
  }
  // processes the kernel marked and that exited before a walk saw them
  std::vector<__u32> dead;
  KeysOf<__u32>(
      maps_.processes, [&](__u32 tgid) { return !processes.Alive(tgid); }, &dead);
  for (const __u32 tgid : dead) Forget(static_cast<pid_t>(tgid));
  // what the kernel keeps under a tgid is dropped before its process is followed (it may be a dead one's)
  for (const Found& process : found) {
    if (process.probed && !FollowedAtExec(process.pid)) forgotten_.insert(static_cast<__u32>(process.pid));
  }
  const bool purged = Purge(forgotten_);
  if (!purged) AppendLog("warn", "cannot read the kernel's goroutine tables: Go processes found now are not followed");
  forgotten_.clear();
  for (const Found& process : found) Mark(process.pid, *process.go, process.probed, purged);
}

bool GoProbes::FollowedAtExec(pid_t pid) const {
  const __u32 tgid = static_cast<__u32>(pid);
  kr_go_process process;
  return bpf_map__lookup_elem(maps_.processes, &tgid, sizeof(tgid), &process, sizeof(process), 0) == 0 &&
         process.state == KR_GO_FOLLOWED;
}

GoProbes::Binary* GoProbes::BinaryOf(pid_t pid) {
  const std::string path = ProcPath(pid, "exe");
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  const kr_go_file file = {(static_cast<__u64>(major(st.st_dev)) << 20) | minor(st.st_dev), st.st_ino};
  const int64_t mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
  auto [at, fresh] = binaries_.try_emplace({file.dev, file.ino});
  Binary& binary = at->second;
  if (!fresh && binary.mtime_ns == mtime_ns) return &binary;
  // a file rewritten in place: its probes were placed by the old contents
  Unprobe(binary);
  binary.mtime_ns = mtime_ns;
  binary.go = InspectGoBinary(path);
  if (!binary.go.is_go) return &binary;
  if (binary.go.unfollowed.empty() && !scope_) {
    binary.links = Attach(path, binary.go, -1, &binary.go.unfollowed);
    if (binary.go.unfollowed.empty()) AppendLog("info", Following(path, binary.go, ""));
  }
  if (!binary.go.unfollowed.empty()) {
    AppendLog("warn", "goroutines of " + Described(path, binary.go) + " are not followed: " + binary.go.unfollowed +
                          "; its events carry no transaction");
  }
  // scoped, a process that execs it later is out of scope or probed by the next scan: the kernel leaves it unmarked
  if (scope_) return &binary;
  // processes that exec it from now on are marked by the kernel at once
  const kr_go_binary known = {binary.go.tls_offset,
                              binary.go.unfollowed.empty() ? KR_GO_FOLLOWED : KR_GO_UNFOLLOWED,
                              0,
                              binary.go.h2_handler_go,
                              binary.go.tls_conn_itab,
                              binary.go.layout.m_curg,
                              binary.go.layout.g_gopc};
  bpf_map__update_elem(maps_.binaries, &file, sizeof(file), &known, sizeof(known), BPF_ANY);
  return &binary;
}

bool GoProbes::AttachTo(pid_t pid, const GoBinary& go) {
  if (!go.unfollowed.empty()) return false;
  const std::string path = ProcPath(pid, "exe");
  std::string why;
  std::vector<bpf_link*> links = Attach(path, go, pid, &why);
  if (!why.empty()) {
    AppendLog("warn", "goroutines of " + Described(path, go) + " are not followed in process " + std::to_string(pid) +
                          ": " + why + "; its events carry no transaction");
    return false;
  }
  process_links_[pid] = std::move(links);
  AppendLog("info", Following(path, go, " in process " + std::to_string(pid) + " alone"));
  return true;
}

std::vector<bpf_link*> GoProbes::Attach(const std::string& path, const GoBinary& go, pid_t pid, std::string* why) {
  struct Probe {
    bpf_program* prog;
    uint64_t offset;
  };
  std::vector<Probe> probes;
  // where the runtime keeps the creator is not known: newproc1's entry reads it from its arguments
  if (!go.layout.m_curg) probes.push_back({programs_.newproc1, go.newproc1});
  if (go.newproc1_runnable) {
    probes.push_back({programs_.newproc1_runnable, go.newproc1_runnable});
  } else {
    for (uint64_t site : go.newproc1_returns) probes.push_back({programs_.newproc1_ret, site});
  }
  if (go.round_trip) {
    probes.push_back({programs_.round_trip, go.round_trip});
    probes.push_back({programs_.conn_write, go.conn_write});
    probes.push_back({programs_.read_loop, go.read_loop});
  }
  if (go.h2_headers) probes.push_back({programs_.h2_headers, go.h2_headers});
  if (go.tls_read) {
    probes.push_back({programs_.tls_read, go.tls_read});
    for (uint64_t site : go.tls_read_returns) probes.push_back({programs_.tls_read_ret, site});
  }
  if (go.chanrecv) {
    probes.push_back({programs_.chansend, go.chansend});
    if (go.chanrecv_calls.empty()) probes.push_back({programs_.chanrecv, go.chanrecv});
    for (uint64_t site : go.chanrecv_calls) probes.push_back({programs_.chanrecv, site});
    for (uint64_t site : go.chanrecv1_returns) probes.push_back({programs_.chanrecv1_ret, site});
    for (uint64_t site : go.chanrecv2_returns) probes.push_back({programs_.chanrecv2_ret, site});
    if (go.chanrecv1_returns.empty() && go.chanrecv2_returns.empty()) {
      for (uint64_t site : go.chanrecv_returns) probes.push_back({programs_.chanrecv_ret, site});
    }
  }
  std::vector<bpf_link*> links;
  for (const Probe& probe : probes) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts);
    bpf_link* link = bpf_program__attach_uprobe_opts(probe.prog, pid, path.c_str(), probe.offset, &opts);
    if (!link) {
      *why = std::string("cannot probe it at ") + std::to_string(probe.offset) + ": " + std::strerror(errno);
      DestroyLinks(links);
      break;
    }
    links.push_back(link);
  }
  return links;
}

void GoProbes::Unprobe(Binary& binary) {
  for (bpf_link* link : binary.links) bpf_link__destroy(link);
  binary.links.clear();
}

void GoProbes::Unprobe(pid_t pid) {
  auto links = process_links_.find(pid);
  if (links == process_links_.end()) return;
  DestroyLinks(links->second);
  process_links_.erase(links);
}

// A followed process was marked by the kernel at its exec, or purged just before; an unfollowed
// one has every thread run a goroutine not known.
void GoProbes::Mark(pid_t pid, const GoBinary& go, bool probed, bool purged) {
  const __u32 tgid = static_cast<__u32>(pid);
  kr_go_process process = {};
  process.tls_offset = go.tls_offset;
  process.h2_handler_go = go.h2_handler_go;
  process.tls_conn_itab = go.tls_conn_itab;
  process.m_curg = go.layout.m_curg;
  process.g_gopc = go.layout.g_gopc;
  // an old goroutine's context may be left under this tgid unless the purge read the tables whole
  process.state = probed && (purged || FollowedAtExec(pid)) ? KR_GO_FOLLOWED : KR_GO_UNFOLLOWED;
  __u64 inherited = 0;
  if (bpf_map__lookup_elem(maps_.exec_contexts, &tgid, sizeof(tgid), &inherited, sizeof(inherited), 0) == 0)
    process.inherited = inherited;
  if (!FollowedAtExec(pid) &&
      bpf_map__update_elem(maps_.processes, &tgid, sizeof(tgid), &process, sizeof(process), BPF_ANY) != 0) {
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
  const bool ours = marked_.erase(pid) != 0;
  const bool kernels = bpf_map__lookup_elem(maps_.processes, &tgid, sizeof(tgid), &process, sizeof(process), 0) == 0;
  if (!ours && !kernels) return;
  const size_t word = (tgid / 64) % maps_.tgid_words;
  __atomic_fetch_and(&maps_.tgids[word], ~(__u64{1} << (tgid % 64)), __ATOMIC_SEQ_CST);
  bpf_map__delete_elem(maps_.processes, &tgid, sizeof(tgid), 0);
  forgotten_.insert(tgid);
}

bool GoProbes::Purge(const std::set<__u32>& tgids) {
  if (tgids.empty()) return true;
  const bool units = DeleteKeys<kr_unit_key>(
      maps_.units, [&](const kr_unit_key& key) { return key.kind == KR_UNIT_GOROUTINE && tgids.count(key.tgid); });
  const bool conns =
      DeleteKeys<kr_go_key>(maps_.conns, [&](const kr_go_key& key) { return tgids.count(key.tgid) != 0; });
  const bool streams =
      DeleteKeys<kr_go_key>(maps_.streams, [&](const kr_go_key& key) { return tgids.count(key.tgid) != 0; });
  const bool tls_reads =
      DeleteKeys<kr_go_key>(maps_.tls_reads, [&](const kr_go_key& key) { return tgids.count(key.tgid) != 0; });
  return units && conns && streams && tls_reads;
}

std::vector<bpf_link*> GoProbes::TakeLinks() {
  std::vector<bpf_link*> links;
  for (auto& [file, binary] : binaries_) {
    links.insert(links.end(), binary.links.begin(), binary.links.end());
    binary.links.clear();
  }
  for (auto& [pid, own] : process_links_) links.insert(links.end(), own.begin(), own.end());
  process_links_.clear();
  return links;
}

void GoProbes::Detach() {
  std::vector<bpf_link*> links = TakeLinks();
  DestroyLinks(links);
}

}  // namespace kreplay
