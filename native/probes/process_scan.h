// The processes of the host, walked in /proc: which started (or exec'd)
// since the last walk and which are gone, for the probe finders that attach
// uprobes to the binaries processes run.
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace kreplay {

class ProcessScan {
 public:
  struct Changes {
    // new processes, and processes whose executable changed (an exec)
    std::vector<pid_t> started;
    // processes that exited, and the earlier program of those that exec'd
    std::vector<pid_t> gone;
  };

  // Walks /proc (kernel threads, which have no executable, left out).
  Changes Walk();
  // What Walk would find when only the `touched` processes can have started, exec'd or exited since
  // the last walk or update (the kernel said so): those alone are looked at.
  Changes Update(const std::set<pid_t>& touched);
  // Whether the last walk found the process.
  bool Alive(pid_t pid) const { return processes_.count(pid) != 0; }

 private:
  // per pid, the inode of the executable it had when walked
  std::map<pid_t, ino_t> processes_;
};

// "/proc/<pid>/<what>"
std::string ProcPath(pid_t pid, const char* what);
// A file's name for logs: a /proc/<pid>/exe path resolved to what the process ran.
std::string Named(const std::string& path);

}  // namespace kreplay
