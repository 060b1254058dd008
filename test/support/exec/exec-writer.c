/*
 * A test build for `kreplay replay --exec` tests: writes to a file, a pipe, a
 * TCP socket and /dev/null, timing each write on CLOCK_MONOTONIC, and records
 * the durations (one line per write: "<label> <ns> <start ns>") in --out at the end
 * (for an anchor sleep: its oversleep, from when it was due).
 *
 *   exec-writer [--out PATH] [--file PATH N] [--pipe N] [--slow-reader-ms MS] [--tcp PORT N]
 *               [--devnull N] [--threads T] [--fork] [--writev] [--exit CODE] [--signal SIG]
 *               [--unix-serve PATH N] [--anchor N] [--stdout N] [--send] [--realtime]
 *
 * --threads T: T threads each do the file writes; --fork: a child does them too.
 * --anchor N: N sleeps of 2 ms before the writes and N after them, and a thread
 * sleeping 2 ms after 2 ms while the writes run, each recorded (label "anchor")
 * as its oversleep: how late this machine wakes a thread of the build right now,
 * during each write too.
 * --unix-serve: listens on a unix socket at PATH, accepts one client and writes
 * to it N times (a server's accepted socket: named by the address it listens on).
 * --stdout N: N log lines to stdout (label "stdout"), as a build logs to its CI pipe.
 * --send: the tcp writes use send(2), as Python's sendall does.
 * --slow-reader-ms: the pipe's reader sleeps that long before each read, so
 * writes into a full pipe block (the incident's build).
 * --realtime: the build's threads run SCHED_FIFO at priority 1, below kreplay's
 * supervisor, so that a timing test measures kreplay's holds rather than the
 * turn a loaded host gives a normal thread (exits 78 without CAP_SYS_NICE).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RECORDS 100000

static struct {
  char label[8];
  long long ns;
  long long start;
} records[MAX_RECORDS];
static int nrecords;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *file_path;
static int file_count, use_writev, use_send, slow_reader_ms;
static char block[65536];

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void record(const char *label, long long ns, long long start) {
  pthread_mutex_lock(&lock);
  if (nrecords < MAX_RECORDS) {
    snprintf(records[nrecords].label, sizeof records[nrecords].label, "%s", label);
    records[nrecords].start = start;
    records[nrecords++].ns = ns;
  }
  pthread_mutex_unlock(&lock);
}

/* a fork while another thread holds the records' lock: the child's copy must not stay locked */
static void lock_records(void) { pthread_mutex_lock(&lock); }
static void unlock_records(void) { pthread_mutex_unlock(&lock); }

static void timed_write(const char *label, int fd, const void *buf, size_t len) {
  long long start = now_ns();
  ssize_t n;
  if (use_writev) {
    struct iovec iov = {(void *)buf, len};
    n = writev(fd, &iov, 1);
  } else if (use_send) {
    n = send(fd, buf, len, 0);
  } else {
    n = write(fd, buf, len);
  }
  long long took = now_ns() - start;
  if (n != (ssize_t)len) {
    perror(label);
    exit(70);
  }
  record(label, took, start);
}

static void file_writes(const char *label) {
  int fd = open(file_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) {
    perror(file_path);
    exit(71);
  }
  for (int i = 0; i < file_count; i++) timed_write(label, fd, "line\n", 5);
  close(fd);
}

static void anchor_sleep(void) {
  long long start = now_ns();
  struct timespec two_ms = {0, 2000000};
  nanosleep(&two_ms, NULL);
  const long long due = start + 2000000;
  record("anchor", now_ns() - due, due);
}

static void anchor_sleeps(int count) {
  for (int i = 0; i < count; i++) anchor_sleep();
}

static atomic_int anchoring;

static void *anchor_main(void *arg) {
  (void)arg;
  while (atomic_load(&anchoring)) anchor_sleep();
  return NULL;
}

static void *thread_main(void *arg) {
  (void)arg;
  file_writes("thread");
  return NULL;
}

static void *pipe_reader(void *arg) {
  int fd = *(int *)arg;
  char buf[65536];
  for (;;) {
    if (slow_reader_ms > 0) usleep(slow_reader_ms * 1000);
    if (read(fd, buf, sizeof buf) <= 0) return NULL;
  }
}

int main(int argc, char **argv) {
  const char *out = NULL;
  int pipe_count = 0, tcp_port = 0, tcp_count = 0, devnull_count = 0, threads = 0, do_fork = 0, exit_code = 0, sig = 0,
      unix_count = 0, anchor_count = 0, stdout_count = 0, realtime = 0;
  const char *unix_path = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--out"))
      out = argv[++i];
    else if (!strcmp(argv[i], "--file"))
      file_path = argv[++i], file_count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--pipe"))
      pipe_count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--slow-reader-ms"))
      slow_reader_ms = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--tcp"))
      tcp_port = atoi(argv[++i]), tcp_count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--devnull"))
      devnull_count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--anchor"))
      anchor_count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--unix-serve"))
      unix_path = argv[++i], unix_count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--fork"))
      do_fork = 1;
    else if (!strcmp(argv[i], "--writev"))
      use_writev = 1;
    else if (!strcmp(argv[i], "--send"))
      use_send = 1;
    else if (!strcmp(argv[i], "--stdout"))
      stdout_count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--realtime"))
      realtime = 1;
    else if (!strcmp(argv[i], "--exit"))
      exit_code = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--signal"))
      sig = atoi(argv[++i]);
    else {
      fprintf(stderr, "exec-writer: unknown argument %s\n", argv[i]);
      return 64;
    }
  }
  /* set before any thread starts: they inherit it */
  struct sched_param fifo = {.sched_priority = 1};
  if (realtime && sched_setscheduler(0, SCHED_FIFO, &fifo) != 0) {
    perror("sched_setscheduler");
    return 78;
  }
  anchor_sleeps(anchor_count);
  pthread_t anchor;
  if (anchor_count > 0) {
    atomic_store(&anchoring, 1);
    pthread_create(&anchor, NULL, anchor_main, NULL);
  }
  pthread_atfork(lock_records, unlock_records, unlock_records);
  if (file_path) {
    if (threads > 0) {
      pthread_t tids[64];
      for (int t = 0; t < threads && t < 64; t++) pthread_create(&tids[t], NULL, thread_main, NULL);
      for (int t = 0; t < threads && t < 64; t++) pthread_join(tids[t], NULL);
    } else {
      file_writes("file");
    }
    if (do_fork) {
      pid_t child = fork();
      if (child == 0) {
        nrecords = 0;
        file_writes("child");
        /* the child's timings go to the same --out, appended */
        if (out) {
          int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
          char line[64];
          for (int i = 0; i < nrecords; i++) {
            int n = snprintf(line, sizeof line, "%s %lld %lld\n", records[i].label, records[i].ns, records[i].start);
            if (write(fd, line, n) != n) return 72;
          }
        }
        _exit(0);
      }
      waitpid(child, NULL, 0);
    }
  }
  for (int i = 0; i < stdout_count; i++) timed_write("stdout", STDOUT_FILENO, "build: step done\n", 17);
  if (pipe_count > 0) {
    int fds[2];
    if (pipe(fds) != 0) return 73;
    /* a small pipe fills after 1 write of a 4 KiB block: the slow reader then sets the pace */
    fcntl(fds[1], F_SETPIPE_SZ, 4096);
    pthread_t reader;
    pthread_create(&reader, NULL, pipe_reader, &fds[0]);
    for (int i = 0; i < pipe_count; i++) timed_write("pipe", fds[1], block, 4096);
    close(fds[1]);
    pthread_join(reader, NULL);
  }
  if (tcp_count > 0) {
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(tcp_port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(sock, (struct sockaddr *)&addr, sizeof addr) != 0) {
      perror("connect");
      return 74;
    }
    for (int i = 0; i < tcp_count; i++) timed_write("tcp", sock, "ping\n", 5);
    close(sock);
  }
  if (unix_path) {
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", unix_path);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 1) != 0) {
      perror(unix_path);
      return 76;
    }
    int conn = accept(listener, NULL, NULL);
    if (conn < 0) return 77;
    for (int i = 0; i < unix_count; i++) timed_write("unix", conn, "pong\n", 5);
    close(conn);
    close(listener);
  }
  if (devnull_count > 0) {
    int fd = open("/dev/null", O_WRONLY);
    for (int i = 0; i < devnull_count; i++) timed_write("devnull", fd, "x", 1);
    close(fd);
  }
  if (anchor_count > 0) {
    atomic_store(&anchoring, 0);
    pthread_join(anchor, NULL);
  }
  anchor_sleeps(anchor_count);
  if (out) {
    /* one line per write, appended: the forked child may have written its own */
    int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
    static char text[MAX_RECORDS * 48];
    size_t used = 0;
    for (int i = 0; i < nrecords; i++)
      used += (size_t)snprintf(text + used, sizeof text - used, "%s %lld %lld\n", records[i].label, records[i].ns,
                               records[i].start);
    if (write(fd, text, used) != (ssize_t)used) return 75;
    close(fd);
  }
  if (sig) raise(sig);
  return exit_code;
}
