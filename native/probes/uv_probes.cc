#include "uv_probes.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "bpf_links.h"
#include "elf_symbols.h"
#include "native_log.h"
#include "process_scan.h"

namespace kreplay {

namespace {

const char* kSubmit = "uv__work_submit";
// uv_queue_work inlines uv__work_submit in libuv's own objects: probed too, it gives the same context twice at worst
const char* kQueueWork = "uv_queue_work";
// What libuv's pool threads run for each kind of request: fs, uv_queue_work (Node's crypto, zlib), dns, random.
const char* kWorkFunctions[] = {"uv__fs_work", "uv__queue_work", "uv__getaddrinfo_work", "uv__getnameinfo_work",
                                "uv__random_work"};

}  // namespace

void UvProbes::Consider(const std::string& path) {
  std::set<std::string> wanted = {kSubmit, kQueueWork};
  wanted.insert(std::begin(kWorkFunctions), std::end(kWorkFunctions));
  const std::map<std::string, uint64_t> symbols = ReadElfSymbols(path, wanted).offsets;
  // uv_queue_work alone is exported by every libuv: the pool is followed only with the local symbols
  if (!symbols.count(kSubmit) || !symbols.count("uv__fs_work")) {
    if (symbols.count(kQueueWork)) {
      AppendLog("info", "libuv's threadpool in " + Named(path) +
                            " is not followed: its local symbols (uv__work_submit) are stripped; its pool's calls "
                            "carry no transaction");
    }
    return;
  }
  if (Attach(path, symbols)) AppendLog("info", "libuv's threadpool is followed in " + Named(path));
}

// Each work function and the submit paths at entry, at the file offsets of `symbols`
// (libbpf would read the whole symbol table again for each name); false (and nothing left attached)
// when one fails.
bool UvProbes::Attach(const std::string& path, const std::map<std::string, uint64_t>& symbols) {
  struct Probe {
    const char* symbol;
    bpf_program* prog;
  };
  std::vector<Probe> probes = {{kSubmit, programs_.work_submit}, {kQueueWork, programs_.queue_work}};
  for (const char* work : kWorkFunctions) probes.push_back({work, programs_.work_start});
  const size_t before = links_.size();
  for (const Probe& probe : probes) {
    const auto offset = symbols.find(probe.symbol);
    if (offset == symbols.end()) continue;
    bpf_link* link = bpf_program__attach_uprobe_opts(probe.prog, -1, path.c_str(), offset->second, nullptr);
    if (!link) {
      const int err = errno;
      while (links_.size() > before) {
        bpf_link__destroy(links_.back());
        links_.pop_back();
      }
      AppendLog("warn", "libuv's threadpool in " + Named(path) + " is not followed: cannot probe " + probe.symbol +
                            ": " + std::strerror(err));
      return false;
    }
    links_.push_back(link);
  }
  return true;
}

void UvProbes::Follow(pid_t pid) {
  std::lock_guard<std::mutex> lock(mutex_);
  scan_.ScanProcess(pid, [this](const std::string& path, pid_t) { Consider(path); });
}

std::vector<bpf_link*> UvProbes::TakeLinks() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<bpf_link*> links = std::move(links_);
  links_.clear();
  return links;
}

void UvProbes::Detach() {
  std::vector<bpf_link*> links = TakeLinks();
  DestroyLinks(links);
}

}  // namespace kreplay
