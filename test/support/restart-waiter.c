/*
 * Blocks in a pipe write() and then in a socket read() while a SIGCHLD
 * handler installed with SA_RESTART interrupts each: a child exits once the
 * call is seen blocked (/proc/PID/syscall), the handler writes a byte to a
 * notification pipe, and another child releases the call (drains the pipe,
 * sends the data) only once that byte came and the call is blocked again,
 * restarted. The kernel restarts both calls: the program sees one write and
 * one read. Likewise a TCP connect to a listener whose queue is full (its
 * SYN dropped), released by an accept that makes room for the SYN sent
 * again: the restarted connect waits on, and returns 0. Then it blocks in a read of a second socket with a SIGUSR1
 * handler installed without SA_RESTART, which whoever sends the signal
 * ends: that read returns EINTR. Writes its pid, the data pipe's write end,
 * the two sockets and the two connecting sockets to the file argv[1].
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCKED_WRITE 65536
#define READ_SIZE 100

static int notify_fd = -1;

static void on_usr1(int sig)
{
	(void)sig;
}

static void on_child(int sig)
{
	char c = (char)sig;

	/* the handler's own call: an event of its own */
	if (write(notify_fd, &c, 1) != 1)
		_exit(3);
}

/* Waits until `pid` is blocked in syscall `nr` on `fd`. */
static void wait_blocked(pid_t pid, long nr, long fd)
{
	char path[64], line[256];

	snprintf(path, sizeof(path), "/proc/%d/syscall", pid);
	for (;;) {
		FILE *f = fopen(path, "r");
		long n = -1, a0 = -1;

		if (!f)
			_exit(4);
		if (fgets(line, sizeof(line), f) && sscanf(line, "%ld %lx", &n, &a0) == 2 && n == nr && a0 == fd) {
			fclose(f);
			return;
		}
		fclose(f);
		usleep(1000);
	}
}

/* Interrupts `pid`'s call `nr` on `fd` with a SIGCHLD, then runs `release` once it is restarted. */
static void interrupt_then(pid_t pid, long nr, long fd, int notified, void (*release)(void *), void *arg)
{
	pid_t interrupter = fork(), releaser;

	if (interrupter == 0) {
		wait_blocked(pid, nr, fd);
		_exit(0);
	}
	releaser = fork();
	if (releaser == 0) {
		char c;

		if (read(notified, &c, 1) != 1)
			_exit(5);
		wait_blocked(pid, nr, fd);
		release(arg);
		_exit(0);
	}
}

static int drain_fd;
static size_t drain_bytes;

static void drain(void *arg)
{
	static char buf[65536];
	size_t got = 0;

	(void)arg;
	while (got < drain_bytes) {
		ssize_t n = read(drain_fd, buf, sizeof(buf));

		if (n <= 0)
			_exit(6);
		got += (size_t)n;
	}
}

static void send_reply(void *arg)
{
	if (write(*(int *)arg, "reply", 5) != 5)
		_exit(7);
}

static void accept_one(void *arg)
{
	if (accept(*(int *)arg, NULL, NULL) < 0)
		_exit(8);
}

/* A fresh notification pipe for the handler: its read end. */
static int notify_pipe(void)
{
	int p[2];

	if (pipe(p))
		exit(1);
	notify_fd = p[1];
	return p[0];
}

static void reap(void)
{
	while (wait(NULL) > 0) {
	}
}

int main(int argc, char **argv)
{
	static char data[BLOCKED_WRITE];
	struct sigaction sa;
	int p[2], sv[2], sv2[2], notified, listener, queued, waiting;
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t addr_len = sizeof(addr);
	FILE *fds;
	size_t filled = 0;
	ssize_t n;
	char buf[READ_SIZE];
	pid_t self = getpid();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_child;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = on_usr1;
	sa.sa_flags = 0;
	sigaction(SIGUSR1, &sa, NULL);
	listener = socket(AF_INET, SOCK_STREAM, 0);
	queued = socket(AF_INET, SOCK_STREAM, 0);
	waiting = socket(AF_INET, SOCK_STREAM, 0);
	if (argc != 2 || pipe(p) || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) ||
	    socketpair(AF_UNIX, SOCK_STREAM, 0, sv2) || listener < 0 || queued < 0 || waiting < 0 ||
	    bind(listener, (struct sockaddr *)&addr, sizeof(addr)) || listen(listener, 0) ||
	    getsockname(listener, (struct sockaddr *)&addr, &addr_len))
		return 1;
	fds = fopen(argv[1], "w");
	if (!fds || fprintf(fds, "%d %d %d %d %d %d\n", self, p[1], sv[0], sv2[0], queued, waiting) < 0 ||
	    fclose(fds))
		return 1;

	/* the pipe full, so that the write blocks before it moved a byte */
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	while ((n = write(p[1], data, 4096)) > 0)
		filled += (size_t)n;
	fcntl(p[1], F_SETFL, 0);
	notified = notify_pipe();
	drain_fd = p[0];
	drain_bytes = filled + BLOCKED_WRITE;
	interrupt_then(self, SYS_write, p[1], notified, drain, NULL);
	if (write(p[1], data, BLOCKED_WRITE) != BLOCKED_WRITE)
		return 2;
	reap();

	notified = notify_pipe();
	interrupt_then(self, SYS_read, sv[0], notified, send_reply, &sv[1]);
	if (read(sv[0], buf, READ_SIZE) != 5)
		return 2;
	reap();

	/* the listener's queue (backlog 0) holds one connection: the next one's SYN is dropped */
	if (connect(queued, (struct sockaddr *)&addr, sizeof(addr)))
		return 2;
	notified = notify_pipe();
	interrupt_then(self, SYS_connect, waiting, notified, accept_one, &listener);
	if (connect(waiting, (struct sockaddr *)&addr, sizeof(addr)))
		return 2;
	reap();

	n = read(sv2[0], buf, READ_SIZE);
	return n == -1 && errno == EINTR ? 0 : 2;
}
