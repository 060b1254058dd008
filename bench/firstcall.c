/*
 * The build of the time-to-first-held-call bench: reads CLOCK_MONOTONIC, makes
 * its first call (one write to TARGET, the call the incident holds first), and
 * writes the clock reading taken just before it to OUT: "first <ns>\n".
 *   usage: firstcall TARGET OUT
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: firstcall TARGET OUT\n");
    return 64;
  }
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return 71;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (write(fd, "x\n", 2) != 2) return 70;
  close(fd);
  char line[64];
  int n = snprintf(line, sizeof line, "first %lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0 || write(out, line, (size_t)n) != n) return 72;
  close(out);
  return 0;
}
