// libuv threadpool probes (bpf/capture/uvpool.h): attached to every binary
// that defines uv__work_submit and the work functions its pool threads run,
// Node (libuv linked in, its local symbols kept) or a libuv.so built with
// them. A uprobe belongs to the file, so every process running an attached
// file is covered at once; programs started later are found by the next
// scan.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "binary_scan.h"

struct bpf_link;
struct bpf_program;

namespace kreplay {

struct UvPrograms {
  bpf_program* work_submit;
  bpf_program* queue_work;
  bpf_program* work_start;
  bpf_program* work_end;
};

class UvProbes {
 public:
  explicit UvProbes(UvPrograms programs) : programs_(programs), scan_({"libuv.so", "libnode.so"}) {}
  ~UvProbes() { Detach(); }
  UvProbes(const UvProbes&) = delete;
  UvProbes& operator=(const UvProbes&) = delete;

  // Every process not seen before (or that exec'd since): its executable and the libuv it maps.
  void Scan();
  // Scan, at most once a second.
  void ScanIfDue();
  // The attached links, handed over for the caller to destroy (in parallel: each waits for a grace period).
  std::vector<bpf_link*> TakeLinks();
  void Detach();

 private:
  void Consider(const std::string& path);
  bool Attach(const std::string& path, const std::map<std::string, uint64_t>& symbols);

  UvPrograms programs_;
  std::vector<bpf_link*> links_;
  BinaryScan scan_;
};

}  // namespace kreplay
