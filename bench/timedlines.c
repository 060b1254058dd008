/*
 * The replay benches' host anchor: N NDJSON lines written to stdout, one
 * every GAP_NS from 20 ms after start, each on its deadline
 * (clock_nanosleep to the absolute time, under SCHED_FIFO 10 where it may,
 * as the daemon's replay clock runs), in the shape `kreplay replay` prints:
 * {"event_id":"I","replay_offset_ns":OFFSET,"emitted_late_ns":LATE}. What a
 * client reading them sees is what this host gives any process's timed
 * writes, with no daemon and no CLI between. With LOOK_NS, lines are timed
 * as the daemon's clock times a dense stretch: it sleeps to the next
 * deadline but looks at most once per LOOK_NS, and each look writes every
 * line due by then in one write. With `relay`, the lines go through the hops
 * a dense CLI play's do: a loopback TCP connection to a child process (a
 * bare relay, as `kreplay replay` is a reader of the daemon's socket) that
 * copies what it reads to stdout.
 *   usage: timedlines N GAP_NS [LOOK_NS [relay]]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LEAD_NS 20000000L
#define NS 1000000000L
/* lines a look writes at most in one write (a dense look holds tens) */
#define LOOK_LINES 512
#define LINE_BYTES 160

static void add_ns(struct timespec *t, long ns)
{
	t->tv_nsec += ns;
	while (t->tv_nsec >= NS) {
		t->tv_sec++;
		t->tv_nsec -= NS;
	}
}

/* Copies `from` to stdout until it ends: the relay child's whole life. */
static int relay(int from)
{
	static char buf[1 << 16];
	for (;;) {
		ssize_t n = read(from, buf, sizeof buf);
		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(1, buf + off, n - off);
			if (w < 0 && errno != EINTR)
				return 1;
			off += w > 0 ? w : 0;
		}
	}
}

/* The fair scheduler's shortest slice, which `kreplay replay` asks for its reader (native/thread_scheduling.h). */
#define SHORTEST_SLICE_NS 100000ULL

/* The kernel's struct sched_attr, up to sched_period. */
struct slice_attr {
	unsigned int size, policy;
	unsigned long long flags;
	int nice;
	unsigned int priority;
	unsigned long long runtime, deadline, period;
};

/*
 * A loopback TCP connection whose reading end a child relays to stdout; the
 * writing end's descriptor, or -1. The child runs under the ordinary
 * scheduler with the slice the CLI asks for (kept where the kernel has no
 * custom slices), as `kreplay replay` does.
 */
static int start_relay(pid_t *child)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof addr;
	int one = 1;
	int listener = socket(AF_INET, SOCK_STREAM, 0);
	if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 1) != 0 ||
	    getsockname(listener, (struct sockaddr *)&addr, &len) != 0)
		return -1;
	int writer = socket(AF_INET, SOCK_STREAM, 0);
	if (writer < 0 || connect(writer, (struct sockaddr *)&addr, sizeof addr) != 0)
		return -1;
	int reader = accept(listener, NULL, NULL);
	close(listener);
	if (reader < 0)
		return -1;
	setsockopt(writer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	*child = fork();
	if (*child < 0)
		return -1;
	if (*child == 0) {
		struct slice_attr slice = { .size = sizeof slice, .runtime = SHORTEST_SLICE_NS };
		syscall(SYS_sched_setattr, 0, &slice, 0);
		close(writer);
		_exit(relay(reader));
	}
	close(reader);
	return writer;
}

static long ns_between(const struct timespec *from, const struct timespec *to)
{
	return (to->tv_sec - from->tv_sec) * NS + (to->tv_nsec - from->tv_nsec);
}

int main(int argc, char **argv)
{
	long lines = argc > 1 ? atol(argv[1]) : 0;
	long gap = argc > 2 ? atol(argv[2]) : 0;
	long look = argc > 3 ? atol(argv[3]) : 0;
	int relayed = argc > 4 && strcmp(argv[4], "relay") == 0;
	int to = 1;
	pid_t child = 0;
	int status = 0;
	struct sched_param realtime = { .sched_priority = 10 };
	struct timespec start, due, wake, now;
	static char out[LOOK_LINES * LINE_BYTES];

	if (lines <= 0 || gap <= 0 || look < 0 || (argc > 4 && !relayed)) {
		fprintf(stderr, "usage: timedlines N GAP_NS [LOOK_NS [relay]] (N and GAP_NS above 0)\n");
		return 2;
	}
	if (relayed && (to = start_relay(&child)) < 0) {
		perror("timedlines: cannot start the relay");
		return 1;
	}
	/* not permitted: the lines are timed under the ordinary scheduler, as an unprivileged daemon's */
	sched_setscheduler(0, SCHED_FIFO, &realtime);
	clock_gettime(CLOCK_MONOTONIC, &start);
	add_ns(&start, LEAD_NS);
	due = start;
	wake = start;
	for (long i = 0; i < lines;) {
		/* no sooner than a look after the last: the deadline, or that look if it is later */
		const struct timespec *until = ns_between(&due, &wake) > 0 ? &wake : &due;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, until, NULL) == EINTR)
			;
		clock_gettime(CLOCK_MONOTONIC, &now);
		size_t len = 0;
		do {
			long late = ns_between(&due, &now);
			len += snprintf(out + len, LINE_BYTES,
					"{\"event_id\":\"%ld\",\"replay_offset_ns\":%ld,\"emitted_late_ns\":%ld}\n", i,
					i * gap, late > 0 ? late : 0);
			i++;
			add_ns(&due, gap);
		} while (look > 0 && i < lines && len + LINE_BYTES <= sizeof out && ns_between(&due, &now) >= 0);
		if (write(to, out, len) != (ssize_t)len)
			return 1;
		wake = now;
		add_ns(&wake, look);
	}
	if (!relayed)
		return 0;
	close(to);
	return waitpid(child, &status, 0) == child && WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
