#include "bpf_links.h"

#include <bpf/libbpf.h>

#include <thread>

namespace kreplay {

void DestroyLinks(std::vector<bpf_link*>& links) {
  std::vector<std::thread> closers;
  for (bpf_link* link : links) closers.emplace_back(bpf_link__destroy, link);
  for (std::thread& closer : closers) closer.join();
  links.clear();
}

}  // namespace kreplay
