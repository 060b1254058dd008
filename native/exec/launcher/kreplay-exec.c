/*
 * kreplay-exec: runs a command under `kreplay replay --exec`.
 *
 *   kreplay-exec PARENT_PID CMD [ARGS...]     (fd 3: a unix stream socket to kreplay)
 *
 * The launcher forks. The child, talking to kreplay on fd 3:
 *   -> "pid N\n"             its pid, for the session kreplay creates
 *   <- "txn ID\n"            it writes `KREPLAY-CTX txn=ID` to /dev/null (before the
 *                            filter: the marker is no call of CMD's), so a running
 *                            agent records the build under that transaction
 *   -> "listener\n" + fd     after installing a seccomp filter that sends the writes,
 *                            sends, fsyncs and connects (`supervised` below) to a
 *                            user-notification listener (every other call passes),
 *                            the listener (SCM_RIGHTS)
 *   <- "go\n"                the supervisor runs: it execs CMD.
 * Threads and children inherit the filter.
 *
 * The parent stays outside the filter as a child subreaper (every orphaned
 * descendant of CMD becomes its child) and waits: it reports CMD's wait status
 * to kreplay ("status N\n") and kills whatever CMD left running. If kreplay dies,
 * the parent gets SIGTERM (PR_SET_PDEATHSIG) and kills CMD and every descendant
 * with SIGKILL, so a build never runs on with its writes failing (ENOSYS) under a
 * dead listener. Under the filter the child only talks on the socket with recv and
 * the hand-over's sendmsg, which the filter passes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#define KR_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define KR_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "kreplay-exec: unsupported architecture"
#endif

#define CONTROL_FD 3
/* Exit codes of the launcher's own failures, as kreplay reads them. */
#define EXIT_SETUP 120
#define EXIT_EXEC 127

static pid_t launcher_pid;

static void die(const char *what) {
  char line[256];
  int n = snprintf(line, sizeof line, "kreplay-exec: %s: %s\n", what, strerror(errno));
  /* the parent is not under the filter; the child's stderr write passes through */
  if (n > 0) (void)!write(STDERR_FILENO, line, (size_t)n);
  _exit(EXIT_SETUP);
}

/*
 * SIGKILLs and reaps our children until none is left: as a subreaper we inherit
 * the descendants of each one killed, so this ends with the whole tree gone.
 * Async-signal-safe (runs in the SIGTERM handler).
 */
static void kill_descendants(void) {
  char path[64] = "/proc/self/task/";
  char digits[16];
  int len = 0;
  for (pid_t self = getpid(); self > 0; self /= 10) digits[len++] = (char)('0' + self % 10);
  size_t at = strlen(path);
  while (len > 0) path[at++] = digits[--len];
  memcpy(path + at, "/children", sizeof "/children");
  for (;;) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    int listed = 0;
    pid_t pid = 0;
    for (ssize_t i = 0; i <= got; i++) {
      if (i < got && buf[i] >= '0' && buf[i] <= '9') {
        pid = pid * 10 + (buf[i] - '0');
      } else if (pid > 0) {
        kill(pid, SIGKILL);
        listed++;
        pid = 0;
      }
    }
    if (listed == 0) return;
    /* reap one, so the orphans of the dead move to us before the next read */
    waitpid(-1, NULL, 0);
  }
}

/* kreplay is gone (or asks us to go): nothing of CMD may outlive it. */
static void on_term(int sig) {
  (void)sig;
  kill_descendants();
  _exit(EXIT_SETUP);
}

/* The calls kreplay supervises (native/exec_call.cc classifies them the same way). */
static const int supervised[] = {
    __NR_write,    __NR_writev,   __NR_pwrite64, __NR_pwritev,   __NR_pwritev2,        __NR_sendto, __NR_sendmsg,
    __NR_sendmmsg, __NR_sendfile, __NR_fsync,    __NR_fdatasync, __NR_sync_file_range, __NR_syncfs, __NR_connect,
};
#define SUPERVISED (sizeof supervised / sizeof supervised[0])
/*
 * The hand-over of the listener itself is a sendmsg on the control socket, made
 * after the filter is in: sendmsg(CONTROL_FD, ..., HANDOFF_FLAGS) passes. The
 * flags are a combination a unix stream socket ignores and no build uses.
 */
#define HANDOFF_FLAGS (MSG_NOSIGNAL | MSG_CONFIRM | MSG_DONTROUTE)
#define ARG_LOW(i) (offsetof(struct seccomp_data, args) + 8 * (i))

/* A jump at index `at` to `to` when equal to `k`, else to `other` (absolute indexes). */
static struct sock_filter jump_eq(size_t at, __u32 k, size_t to, size_t other) {
  return (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, (__u8)(to - at - 1), (__u8)(other - at - 1));
}

static int install_filter(void) {
  /* arch check; the list, each a jump to NOTIFY; ALLOW; the hand-over's exception; ALLOW; NOTIFY */
  struct sock_filter code[5 + SUPERVISED + 1 + 6 + 2];
  const size_t handoff = 5 + SUPERVISED + 1, allow = handoff + 6, notify = allow + 1;
  size_t n = 0;
  code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, KR_AUDIT_ARCH, 1, 0);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  code[n] = jump_eq(n, __NR_sendmsg, handoff, n + 1);
  n++;
  for (size_t i = 0; i < SUPERVISED; i++, n++) code[n] = jump_eq(n, (__u32)supervised[i], notify, n + 1);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  /* sendmsg: the hand-over passes (its fd, its flags), any other goes to kreplay */
  code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(0));
  code[n] = jump_eq(n, CONTROL_FD, n + 1, notify);
  n++;
  code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(0) + 4);
  code[n] = jump_eq(n, 0, n + 1, notify);
  n++;
  code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(2));
  code[n] = jump_eq(n, HANDOFF_FLAGS, allow, notify);
  n++;
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
  struct sock_fprog prog = {.len = (unsigned short)n, .filter = code};
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

/* `text`, with `fd` attached when it is not -1. */
static void send_message(const char *text, int fd) {
  struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    msg.msg_control = control.buf;
    msg.msg_controllen = sizeof control.buf;
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  }
  if (sendmsg(CONTROL_FD, &msg, HANDOFF_FLAGS) != (ssize_t)iov.iov_len) die("cannot talk to kreplay");
}

/* One line from kreplay, without its newline; EOF or anything malformed: kreplay gave up. */
static void receive_line(char *line, size_t size) {
  size_t used = 0;
  while (used < size - 1) {
    ssize_t got = recv(CONTROL_FD, line + used, size - 1 - used, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) _exit(EXIT_SETUP);
    used += (size_t)got;
    if (memchr(line, '\n', used)) break;
  }
  line[used] = '\0';
  char *end = strchr(line, '\n');
  if (!end) _exit(EXIT_SETUP);
  *end = '\0';
}

static void run_child(char **argv) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die("PR_SET_PDEATHSIG");
  if (getppid() != launcher_pid) _exit(EXIT_SETUP);
  char line[256];
  snprintf(line, sizeof line, "pid %d\n", (int)getpid());
  send_message(line, -1);
  receive_line(line, sizeof line);
  if (strncmp(line, "txn ", 4) != 0) _exit(EXIT_SETUP);
  char marker[300];
  int n = snprintf(marker, sizeof marker, "KREPLAY-CTX txn=%s\n", line + 4);
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull < 0 || write(devnull, marker, (size_t)n) != n) die("cannot write the context marker");
  close(devnull);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("PR_SET_NO_NEW_PRIVS");
  int listener = install_filter();
  if (listener < 0) {
    /* kreplay names it (E_EXEC_SECCOMP): a seccomp profile that forbids it, a kernel without it */
    int err = errno;
    snprintf(line, sizeof line, "no-listener %d\n", err);
    send_message(line, -1);
    errno = err;
    die("cannot install the seccomp filter (SECCOMP_FILTER_FLAG_NEW_LISTENER)");
  }
  send_message("listener\n", listener);
  close(listener);
  receive_line(line, sizeof line);
  if (strcmp(line, "go") != 0) _exit(EXIT_SETUP);
  close(CONTROL_FD);
  execvp(argv[0], argv);
  int err = errno;
  char failure[512];
  n = snprintf(failure, sizeof failure, "kreplay-exec: cannot run %s: %s\n", argv[0], strerror(err));
  if (n > 0) (void)!write(STDERR_FILENO, failure, (size_t)n);
  _exit(EXIT_EXEC);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: kreplay-exec PARENT_PID CMD [ARGS...] (fd 3: kreplay's socket)\n");
    return 2;
  }
  struct sigaction term = {.sa_handler = on_term};
  sigemptyset(&term.sa_mask);
  sigaction(SIGTERM, &term, NULL);
  /* Ctrl-C goes to kreplay's foreground group: kreplay decides what CMD gets */
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) die("PR_SET_PDEATHSIG");
  if (getppid() != (pid_t)atoi(argv[1])) return EXIT_SETUP; /* kreplay died before the prctl */
  if (fcntl(CONTROL_FD, F_GETFD) < 0) die("no control socket on fd 3");
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die("PR_SET_CHILD_SUBREAPER");
  launcher_pid = getpid();

  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old);
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    run_child(argv + 2);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);

  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) die("waitpid");
  }
  /* what CMD left running does not outlive it */
  kill_descendants();
  char line[32];
  int n = snprintf(line, sizeof line, "status %d\n", status);
  (void)!send(CONTROL_FD, line, (size_t)n, MSG_NOSIGNAL);
  return 0;
}
