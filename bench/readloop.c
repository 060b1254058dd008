/*
 * Times N read-side calls, optionally pinned to one CPU; prints nanoseconds
 * per iteration.   usage: readloop file|socket|http [N] [CPU]
 *   file:   read(2) of 64 bytes from a regular file (rewound at its end)
 *   file-context: the same by a thread that wrote a KREPLAY-CTX marker first (its reads are events)
 *   socket: sendto(2) then recvfrom(2) of 64 binary bytes on a unix socket pair
 *   http:   the same with an HTTP/1.1 request head carrying a traceparent
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char HEAD[] = "GET /bench HTTP/1.1\r\nHost: bench\r\n"
			   "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
			   "x-request-id: bench-1\r\n\r\n";

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "file";
	long n = argc > 2 ? atol(argv[2]) : 1000000;
	char buf[256];
	struct timespec start, end;
	int fd = -1, pair[2];
	const char *msg = buf;
	size_t len = 64;

	if (n <= 0)
		return 2;
	if (argc > 3) {
		cpu_set_t cpus;

		CPU_ZERO(&cpus);
		CPU_SET(atoi(argv[3]), &cpus);
		if (sched_setaffinity(0, sizeof(cpus), &cpus))
			return 3;
	}
	memset(buf, 0, sizeof(buf));
	if (!strcmp(mode, "file-context")) {
		static const char marker[] = "KREPLAY-CTX txn=readloop\n";
		int null = open("/dev/null", O_WRONLY);

		if (null < 0 || write(null, marker, sizeof(marker) - 1) != sizeof(marker) - 1)
			return 4;
		close(null);
		mode = "file";
	}
	if (!strcmp(mode, "file")) {
		char path[] = "/tmp/kreplay-readloop-XXXXXX";

		fd = mkstemp(path);
		if (fd < 0 || write(fd, buf, sizeof(buf)) != sizeof(buf))
			return 4;
		unlink(path);
		lseek(fd, 0, SEEK_SET);
	} else {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair))
			return 4;
		if (!strcmp(mode, "http")) {
			msg = HEAD;
			len = sizeof(HEAD) - 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (long i = 0; i < n; i++) {
		if (fd >= 0) {
			ssize_t got = read(fd, buf, 64);

			if (got == 0)
				lseek(fd, 0, SEEK_SET);
			else if (got < 0)
				return 1;
		} else if (sendto(pair[0], msg, len, 0, NULL, 0) != (ssize_t)len ||
			   recvfrom(pair[1], buf, sizeof(buf), 0, NULL, NULL) != (ssize_t)len) {
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	printf("%.3f\n", ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / n);
	return 0;
}
