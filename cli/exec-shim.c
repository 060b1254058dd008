// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kreplay run's launcher: `kreplay-exec-shim MARKER CMD [ARG...]` writes
 * MARKER to /dev/null in one write(2), then execs CMD in the same thread.
 * The context the marker sets in the kernel thus belongs to CMD alone; the
 * Node wrapper that forked this process never carries it. No other write
 * happens here, so a traced transaction holds the marker and CMD's writes.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int fd;
  size_t len;

  if (argc < 3) {
    fprintf(stderr, "usage: kreplay-exec-shim MARKER CMD [ARG...]\n");
    return 127;
  }
  fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "kreplay run: cannot open /dev/null: %s\n", strerror(errno));
    return 127;
  }
  len = strlen(argv[1]);
  if (write(fd, argv[1], len) != (ssize_t)len) {
    fprintf(stderr, "kreplay run: cannot write the context marker: %s\n", strerror(errno));
    return 127;
  }
  close(fd);
  execvp(argv[2], &argv[2]);
  fprintf(stderr, "kreplay run: cannot start %s: %s\n", argv[2], strerror(errno));
  return errno == ENOENT ? 127 : 126;
}
