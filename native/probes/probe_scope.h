// Which processes the uprobes are put in (issue 46). A uprobe attached to a
// file (pid -1) puts a breakpoint in every process that maps it, and each of
// them pays for every hit whatever the agent follows. When the capture can
// store nothing of other processes (--filter-transactions, only pids
// included), the uprobes go to the included processes alone, one link each:
// the kernel then writes the breakpoint into their memory only.
#pragma once

#include <sys/types.h>

#include <optional>
#include <set>

namespace kreplay {

// The processes to probe; nullopt: every process on the host.
using ProbeScope = std::optional<std::set<pid_t>>;

inline bool InScope(const ProbeScope& scope, pid_t pid) { return !scope || scope->count(pid) != 0; }

}  // namespace kreplay
