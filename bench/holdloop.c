/*
 * T threads, each writing W times 64 bytes to its own file DIR/tN (its own
 * target), timing each write on CLOCK_MONOTONIC, pausing a pseudo-random
 * 0..GAP µs after each so that the threads' calls do not fall due together
 * (on 2 cores, 8 calls released at once would measure the CPU queue, not the
 * hold). At the end one write of "thread index ns" lines to OUT.
 *   usage: holdloop DIR T W GAP_US OUT
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static long writes, gap_us;
static long long *times;

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *run(void *arg) {
  long thread = (long)arg;
  char path[4096], buf[64];
  snprintf(path, sizeof path, "%s/t%ld", dir, thread);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) exit(2);
  memset(buf, 'k', sizeof buf);
  unsigned seed = (unsigned)thread * 2654435761u + 1;
  for (long i = 0; i < writes; i++) {
    long long start = now_ns();
    if (write(fd, buf, sizeof buf) != sizeof buf) exit(1);
    times[thread * writes + i] = now_ns() - start;
    if (gap_us > 0) usleep((useconds_t)(rand_r(&seed) % gap_us));
  }
  close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 6) return 64;
  dir = argv[1];
  long threads = atol(argv[2]);
  writes = atol(argv[3]);
  gap_us = atol(argv[4]);
  times = calloc((size_t)(threads * writes), sizeof *times);
  pthread_t tids[256];
  if (threads < 1 || threads > 256 || !times) return 64;
  for (long t = 0; t < threads; t++) pthread_create(&tids[t], NULL, run, (void *)t);
  for (long t = 0; t < threads; t++) pthread_join(tids[t], NULL);
  size_t size = (size_t)(threads * writes) * 48, used = 0;
  char *text = malloc(size);
  for (long t = 0; t < threads; t++)
    for (long i = 0; i < writes; i++)
      used += (size_t)snprintf(text + used, size - used, "%ld %ld %lld\n", t, i, times[t * writes + i]);
  int out = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0 || write(out, text, used) != (ssize_t)used) return 3;
  return 0;
}
