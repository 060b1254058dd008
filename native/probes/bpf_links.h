// Detaching many BPF links at once.
#pragma once

#include <vector>

struct bpf_link;

namespace kreplay {

// Destroys the links and empties the vector. Each detach waits for a grace period (a
// tracepoint's, a uprobe's); in parallel they share it.
void DestroyLinks(std::vector<bpf_link*>& links);

}  // namespace kreplay
