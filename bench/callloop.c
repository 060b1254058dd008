/*
 * The calls the relay and hold benchmarks time (bench/exec-relay.ts), each on
 * CLOCK_MONOTONIC, one "ns" line per call on stdout at the end:
 *   callloop fsync FILE N          append 64 bytes, then time fdatasync, N times
 *   callloop connect PORT N        time a blocking connect to 127.0.0.1:PORT, N times
 *   callloop exchange PORT N       one connection: time a 64-byte send until 64 bytes come back, N times
 *   callloop bulk PORT MIB         one connection: send "B", time the arrival of MIB MiB (one line: ns)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int dial(int port) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) exit(2);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void read_exactly(int fd, char *buf, size_t len) {
  for (size_t got = 0; got < len;) {
    ssize_t n = recv(fd, buf + got, len - got, 0);
    if (n <= 0) exit(3);
    got += (size_t)n;
  }
}

int main(int argc, char **argv) {
  if (argc != 4) return 64;
  const char *mode = argv[1];
  long n = atol(argv[3]);
  long long *times = calloc((size_t)n + 1, sizeof *times);
  char buf[65536];
  memset(buf, 'k', sizeof buf);
  long count = n;
  if (strcmp(mode, "fsync") == 0) {
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return 2;
    for (long i = 0; i < n; i++) {
      if (write(fd, buf, 64) != 64) return 3;
      long long start = now_ns();
      if (fdatasync(fd) != 0) return 3;
      times[i] = now_ns() - start;
    }
  } else if (strcmp(mode, "connect") == 0) {
    for (long i = 0; i < n; i++) {
      long long start = now_ns();
      int fd = dial(atoi(argv[2]));
      times[i] = now_ns() - start;
      close(fd);
    }
  } else if (strcmp(mode, "exchange") == 0) {
    int fd = dial(atoi(argv[2]));
    for (long i = 0; i < n; i++) {
      long long start = now_ns();
      if (send(fd, buf, 64, 0) != 64) return 3;
      read_exactly(fd, buf, 64);
      times[i] = now_ns() - start;
    }
    close(fd);
  } else if (strcmp(mode, "bulk") == 0) {
    int fd = dial(atoi(argv[2]));
    long long start = now_ns();
    if (send(fd, "B", 1, 0) != 1) return 3;
    for (long long left = n * 1048576LL; left > 0;) {
      ssize_t got = recv(fd, buf, sizeof buf, 0);
      if (got <= 0) return 3;
      left -= got;
    }
    times[0] = now_ns() - start;
    count = 1;
    close(fd);
  } else {
    return 64;
  }
  for (long i = 0; i < count; i++) printf("%lld\n", times[i]);
  return 0;
}
