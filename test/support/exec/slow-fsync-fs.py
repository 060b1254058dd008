"""A FUSE filesystem over a directory whose fsync is what the test makes it:
it sleeps for a stall, or fails with EIO, as a disk does in the incidents
`kreplay replay --exec` reproduces (the kernel has no device-mapper here).

  /usr/bin/python3 slow-fsync-fs.py BACKING MOUNTPOINT MODE
    MODE: stall:MS (each fsync/fdatasync takes MS ms) or eio (each fails with EIO)
Runs in the foreground until unmounted (umount MOUNTPOINT).
"""
import errno
import os
import sys
import time

from fusepy import FUSE, FuseOSError, Operations


class SlowFsync(Operations):
    def __init__(self, backing, mode):
        self.backing = backing
        self.mode = mode

    def _path(self, path):
        return os.path.join(self.backing, path.lstrip("/"))

    def getattr(self, path, fh=None):
        st = os.lstat(self._path(path))
        keys = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_atime", "st_mtime", "st_ctime")
        return {key: getattr(st, key) for key in keys}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def create(self, path, mode, fi=None):
        return os.open(self._path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def open(self, path, flags):
        return os.open(self._path(path), flags & ~os.O_APPEND)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        os.truncate(self._path(path), length)

    def unlink(self, path):
        os.unlink(self._path(path))

    def release(self, path, fh):
        os.close(fh)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        if self.mode == "eio":
            raise FuseOSError(errno.EIO)
        time.sleep(int(self.mode.split(":")[1]) / 1000)
        return 0


if __name__ == "__main__":
    backing, mountpoint, mode = sys.argv[1:4]
    FUSE(SlowFsync(backing, mode), mountpoint, foreground=True, nothreads=True)
