// An exclusive advisory lock on a file, held as long as a descriptor is open: what keeps a
// second agent off a node store (agent/store/writer-lock.ts).
#pragma once

#include <string>

namespace kreplay {

// Opens `path` (created 0644 if missing) and takes flock(LOCK_EX | LOCK_NB) on it; returns the
// close-on-exec descriptor that holds the lock. Throws NativeFailure E_STORE_LOCKED when another
// open file of the file holds it, E_STORE_OPEN when it cannot be opened.
int LockFileExclusive(const std::string& path);

// Closes a descriptor LockFileExclusive gave, which drops the lock. Here, not with fs.closeSync:
// Node tracks the descriptors its fs opened, and warns (in worker threads) on closing another.
void UnlockFile(int fd);

}  // namespace kreplay
