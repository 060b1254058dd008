#include "file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "native_error.h"

namespace kreplay {

int LockFileExclusive(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw NativeFailure("E_STORE_OPEN", "cannot open " + path + ": " + std::strerror(errno));
  // a lock on the open file, not a pid in a side file: it goes with the last descriptor, whatever
  // killed the holder, and deleting a file beside the store cannot hand it to a second writer
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) throw NativeFailure("E_STORE_LOCKED", path + " is locked by another writer");
    throw NativeFailure("E_STORE_OPEN", "cannot lock " + path + ": " + std::strerror(err));
  }
  return fd;
}

void UnlockFile(int fd) {
  if (close(fd) != 0 && errno != EINTR)
    throw NativeFailure("E_STORE_OPEN", std::string("cannot close a store lock: ") + std::strerror(errno));
}

}  // namespace kreplay
