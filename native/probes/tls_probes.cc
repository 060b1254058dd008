#include "tls_probes.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <iterator>

#include "bpf_links.h"
#include "elf_symbols.h"
#include "native_log.h"
#include "process_scan.h"

namespace kreplay {

namespace {

// Where Debian and most distributions keep OpenSSL 3's libssl.
const char* kLibsslPaths[] = {"/usr/lib/x86_64-linux-gnu/libssl.so.3", "/usr/lib/aarch64-linux-gnu/libssl.so.3",
                              "/usr/lib64/libssl.so.3", "/usr/lib/libssl.so.3"};

const char* kSymbols[] = {"SSL_read", "SSL_read_ex", "SSL_write", "SSL_write_ex"};

}  // namespace

bool TlsProbes::Owns(const bpf_program* prog) {
  const char* section = bpf_program__section_name(prog);
  return std::strcmp(section, "uprobe") == 0 || std::strcmp(section, "uretprobe") == 0;
}

void TlsProbes::Consider(const std::string& path, pid_t pid) {
  // the SSL_read family's symbols the file defines, where they are in it
  const std::map<std::string, uint64_t> symbols =
      ReadElfSymbols(path, {std::begin(kSymbols), std::end(kSymbols)}).offsets;
  if (symbols.count("SSL_read") && symbols.count("SSL_write") && Attach(path, pid, symbols))
    binaries_.push_back(Named(path));
}

// Both ends of each read, the entry of each write, at the symbols' file offsets (libbpf would read
// the whole symbol table again for each name), in process `pid` (-1: every process); false (and nothing
// left attached) when one fails.
bool TlsProbes::Attach(const std::string& path, pid_t pid, const std::map<std::string, uint64_t>& symbols) {
  struct Probe {
    const char* symbol;
    bpf_program* prog;
    bool ret;
  } probes[] = {
      {"SSL_read", programs_.read_enter, false},       {"SSL_read", programs_.read_exit, true},
      {"SSL_read_ex", programs_.read_ex_enter, false}, {"SSL_read_ex", programs_.read_ex_exit, true},
      {"SSL_write", programs_.write_enter, false},     {"SSL_write_ex", programs_.write_ex_enter, false},
  };
  const size_t before = links_.size();
  for (const Probe& probe : probes) {
    const auto offset = symbols.find(probe.symbol);
    if (offset == symbols.end()) continue;
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = probe.ret);
    bpf_link* link = bpf_program__attach_uprobe_opts(probe.prog, pid, path.c_str(), offset->second, &opts);
    if (!link) {
      const int err = errno;
      while (links_.size() > before) {
        bpf_link__destroy(links_.back());
        links_.pop_back();
      }
      AppendLog("warn", "TLS requests in " + Named(path) + " are not attributed: cannot probe " + probe.symbol + ": " +
                            std::strerror(err));
      return false;
    }
    links_.push_back(link);
  }
  AppendLog("info", "TLS plaintext is read from " + Named(path) +
                        (pid < 0 ? "" : " in process " + std::to_string(pid) + " alone"));
  return true;
}

void TlsProbes::Scan(const ProcessScan::Changes& changes) {
  const BinaryScan::Visit consider = [this](const std::string& path, pid_t pid) { Consider(path, pid); };
  if (whole_host_) {
    for (const char* path : kLibsslPaths) scan_.Offer(path, -1, consider);
  }
  // a libssl elsewhere than the usual paths too (a container's, a vendored one)
  scan_.Scan(changes, consider);
}

std::vector<bpf_link*> TlsProbes::TakeLinks() {
  std::vector<bpf_link*> links = std::move(links_);
  links_.clear();
  return links;
}

void TlsProbes::Detach() { DestroyLinks(links_); }

}  // namespace kreplay
