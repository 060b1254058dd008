// TLS plaintext probes (bpf/capture/tls.h): attaches them to every binary
// that holds OpenSSL's SSL_read family, a shared libssl or a program that
// links OpenSSL in (the pinned Node). A uprobe belongs to the file, so a
// process that maps an attached libssl later is covered at once; programs
// started later are found by the next scan (capture_engine.h's
// ScanProcesses). Scoped (probe_scope.h), each process in scope has its own
// probes and no other process any.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "binary_scan.h"
#include "probe_scope.h"
#include "process_scan.h"

struct bpf_link;
struct bpf_program;

namespace kreplay {

struct TlsPrograms {
  bpf_program* read_enter;
  bpf_program* read_exit;
  bpf_program* read_ex_enter;
  bpf_program* read_ex_exit;
  bpf_program* write_enter;
  bpf_program* write_ex_enter;
};

class TlsProbes {
 public:
  TlsProbes(TlsPrograms programs, ProbeScope scope)
      : programs_(programs), whole_host_(!scope), scan_({"libssl.so"}, std::move(scope)) {}
  ~TlsProbes() { Detach(); }
  TlsProbes(const TlsProbes&) = delete;
  TlsProbes& operator=(const TlsProbes&) = delete;

  // Whether the program is one of these (attached here, not by section name).
  static bool Owns(const bpf_program* prog);

  // The usual libssl paths (whole host), then every process in scope that
  // started (or exec'd) by `changes`: its executable and the libssl it maps.
  void Scan(const ProcessScan::Changes& changes);
  // The attached links, handed over for the caller to destroy (in parallel: each waits for a grace period).
  std::vector<bpf_link*> TakeLinks();
  void Detach();

  // The files probed so far.
  const std::vector<std::string>& binaries() const { return binaries_; }

 private:
  void Consider(const std::string& path, pid_t pid);
  bool Attach(const std::string& path, pid_t pid, const std::map<std::string, uint64_t>& symbols);

  TlsPrograms programs_;
  bool whole_host_;
  std::vector<bpf_link*> links_;
  std::vector<std::string> binaries_;
  BinaryScan scan_;
};

}  // namespace kreplay
