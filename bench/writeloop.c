/*
 * Times W write(2) calls of 64 bytes to /dev/null, optionally pinned to one
 * CPU; prints nanoseconds per write.   usage: writeloop [W] [CPU] [DIR]
 * With DIR, each write goes to a file of its own there, created before it
 * and removed after it (timed with the write): every write has a new target.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long writes = argc > 1 ? atol(argv[1]) : 2000000;
	int fd = open("/dev/null", O_WRONLY);
	char buf[64];
	struct timespec start, end;

	if (fd < 0 || writes <= 0)
		return 2;
	if (argc > 2) {
		cpu_set_t cpus;

		CPU_ZERO(&cpus);
		CPU_SET(atoi(argv[2]), &cpus);
		if (sched_setaffinity(0, sizeof(cpus), &cpus))
			return 3;
	}
	memset(buf, 'k', sizeof(buf));
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (long i = 0; i < writes; i++) {
		char path[4096];

		if (argc > 3) {
			snprintf(path, sizeof(path), "%s/w%ld", argv[3], i);
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0)
				return 4;
		}
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			return 1;
		if (argc > 3 && (close(fd) || unlink(path)))
			return 5;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	printf("%.3f\n", ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / writes);
	return 0;
}
