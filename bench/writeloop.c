/*
 * Times W write(2) calls of 64 bytes to /dev/null, optionally pinned to one
 * CPU, and paced to RATE writes/s (0: as fast as it can); prints nanoseconds
 * per write.   usage: writeloop [W] [CPU] [DIR] [RATE]   (CPU -1: not pinned)
 * With DIR (not "-"), each write goes to a file of its own there, created
 * before it and removed after it (timed with the write): every write has a
 * new target.
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
	int new_files = argc > 3 && strcmp(argv[3], "-") != 0;
	long rate = argc > 4 ? atol(argv[4]) : 0;
	int fd = open("/dev/null", O_WRONLY);
	char buf[64];
	struct timespec start, end;

	if (fd < 0 || writes <= 0)
		return 2;
	if (argc > 2 && atoi(argv[2]) >= 0) {
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

		if (new_files) {
			snprintf(path, sizeof(path), "%s/w%ld", argv[3], i);
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0)
				return 4;
		}
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			return 1;
		if (new_files && (close(fd) || unlink(path)))
			return 5;
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
