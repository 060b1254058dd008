/*
 * A traced request's writes, for the OTLP export benchmark: sends an HTTP
 * head with a sampled W3C traceparent on a socket (which sets the thread's
 * trace context, as a client's request does), then W write(2) calls of 64
 * bytes to /dev/null in that trace, a new trace every PER_TRACE writes, paced
 * to RATE writes/s (0: as fast as it can); prints nanoseconds per write.
 *   usage: traceloop [W] [RATE] [PER_TRACE]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int send_head(int sock, long trace)
{
	char head[256];
	int len = snprintf(head, sizeof(head),
			   "GET /work HTTP/1.1\r\nHost: bench\r\n"
			   "traceparent: 00-%016lx%016lx-00f067aa0ba902b7-01\r\n\r\n",
			   0x4bf92f3577b34da6L, trace + 1);

	return write(sock, head, len) == len ? 0 : -1;
}

int main(int argc, char **argv)
{
	long writes = argc > 1 ? atol(argv[1]) : 1000000;
	long rate = argc > 2 ? atol(argv[2]) : 0;
	long per_trace = argc > 3 ? atol(argv[3]) : 500;
	int fd = open("/dev/null", O_WRONLY);
	int pair[2];
	char buf[64];
	struct timespec start, end;

	if (fd < 0 || writes <= 0 || per_trace <= 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, pair))
		return 2;
	memset(buf, 'k', sizeof(buf));
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (long i = 0; i < writes; i++) {
		char drain[256];

		if (i % per_trace == 0) {
			if (send_head(pair[0], i / per_trace))
				return 3;
			if (read(pair[1], drain, sizeof(drain)) <= 0)
				return 4;
		}
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			return 1;
		/* paced: after each millisecond's share, sleep until the next millisecond is due */
		if (rate > 0 && (i + 1) % (rate / 1000 > 0 ? rate / 1000 : 1) == 0) {
			long long due_ns = (long long)((i + 1) * 1e9 / rate);
			struct timespec due = start;

			due.tv_sec += due_ns / 1000000000;
			due.tv_nsec += due_ns % 1000000000;
			if (due.tv_nsec >= 1000000000) {
				due.tv_sec++;
				due.tv_nsec -= 1000000000;
			}
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	printf("%.3f\n", ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / writes);
	return 0;
}
