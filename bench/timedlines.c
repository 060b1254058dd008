/*
 * The replay benches' host anchor: N NDJSON lines written to stdout, one
 * every GAP_NS from 20 ms after start, each on its deadline
 * (clock_nanosleep to the absolute time, under SCHED_FIFO 10 where it may,
 * as the daemon's replay clock runs), in the shape `kreplay replay` prints:
 * {"event_id":"I","replay_offset_ns":OFFSET,"emitted_late_ns":LATE}. What a
 * client reading them sees is what this host gives any process's timed
 * writes, with no daemon and no CLI between.   usage: timedlines N GAP_NS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define LEAD_NS 20000000L
#define NS 1000000000L

static void add_ns(struct timespec *t, long ns)
{
	t->tv_nsec += ns;
	while (t->tv_nsec >= NS) {
		t->tv_sec++;
		t->tv_nsec -= NS;
	}
}

int main(int argc, char **argv)
{
	long lines = argc > 1 ? atol(argv[1]) : 0;
	long gap = argc > 2 ? atol(argv[2]) : 0;
	struct sched_param realtime = { .sched_priority = 10 };
	struct timespec due, now;
	char line[160];

	if (lines <= 0 || gap <= 0) {
		fprintf(stderr, "usage: timedlines N GAP_NS (both above 0)\n");
		return 2;
	}
	/* not permitted: the lines are timed under the ordinary scheduler, as an unprivileged daemon's */
	sched_setscheduler(0, SCHED_FIFO, &realtime);
	clock_gettime(CLOCK_MONOTONIC, &due);
	add_ns(&due, LEAD_NS);
	for (long i = 0; i < lines; i++) {
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR)
			;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long late = (now.tv_sec - due.tv_sec) * NS + (now.tv_nsec - due.tv_nsec);
		int len = snprintf(line, sizeof line,
				   "{\"event_id\":\"%ld\",\"replay_offset_ns\":%ld,\"emitted_late_ns\":%ld}\n", i,
				   i * gap, late > 0 ? late : 0);
		if (write(1, line, len) != len)
			return 1;
		add_ns(&due, gap);
	}
	return 0;
}
