/*
 * Writes once to each kind of target and exits at once, for the kernel
 * tests of write targets. Each write has its own size, so a test can tell
 * them apart: 11 file, 12 pipe, 13 /dev/null, 14 tcp v4, 15 tcp v6,
 * 16 unix stream, 17 udp v4, 18 unix abstract, 19 unlinked file, 8 eventfd,
 * 20 a second unix stream socket, after the first one was closed; 21 and 22
 * a unix datagram socket connected to UNIX_PATH.d1, then to UNIX_PATH.d2.
 * usage: target-writer FILE UNIX_PATH TCP4_PORT TCP6_PORT UDP4_PORT ABSTRACT_NAME UNIX_PATH2
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char bytes[64];

static void must(int ok, const char *what)
{
	if (!ok) {
		perror(what);
		exit(2);
	}
}

static void write_n(int fd, size_t n, const char *what)
{
	must(write(fd, bytes, n) == (ssize_t)n, what);
}

static int inet_socket(int family, int type, const char *addr, int port)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	int fd = socket(family, type, 0);

	must(fd >= 0, "socket");
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		inet_pton(AF_INET, addr, &in->sin_addr);
		len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		inet_pton(AF_INET6, addr, &in6->sin6_addr);
		len = sizeof(*in6);
	}
	must(connect(fd, (struct sockaddr *)&ss, len) == 0, "connect");
	return fd;
}

static int unix_socket(int type, const char *name, int abstract)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	size_t n = strlen(name);
	int fd = socket(AF_UNIX, type, 0);

	must(fd >= 0 && n < sizeof(un.sun_path) - 1, "unix socket");
	memcpy(un.sun_path + (abstract ? 1 : 0), name, n);
	must(connect(fd, (struct sockaddr *)&un, offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 0)) == 0,
	     "connect unix");
	return fd;
}

/* Binds NAME.d1 and NAME.d2 here, then writes to each through one socket, reconnected between. */
static void reconnect_dgram(const char *name)
{
	char paths[2][sizeof(((struct sockaddr_un *)0)->sun_path)];
	int client = socket(AF_UNIX, SOCK_DGRAM, 0);

	must(client >= 0, "unix dgram");
	for (int i = 0; i < 2; i++) {
		struct sockaddr_un un = {.sun_family = AF_UNIX};
		int server = socket(AF_UNIX, SOCK_DGRAM, 0);

		must(snprintf(paths[i], sizeof(paths[i]), "%s.d%d", name, i + 1) < (int)sizeof(paths[i]), "path");
		memcpy(un.sun_path, paths[i], strlen(paths[i]) + 1);
		must(server >= 0 && bind(server, (struct sockaddr *)&un, sizeof(un)) == 0, "bind dgram");
		must(connect(client, (struct sockaddr *)&un, sizeof(un)) == 0, "connect dgram");
		write_n(client, 21 + i, "unix dgram");
		unlink(paths[i]);
	}
}

int main(int argc, char **argv)
{
	int pipefd[2];
	int fd;
	char unlinked[4096];

	must(argc == 8, "usage: target-writer FILE UNIX_PATH TCP4_PORT TCP6_PORT UDP4_PORT ABSTRACT_NAME UNIX_PATH2");
	memset(bytes, 'x', sizeof(bytes));
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	must(fd >= 0, "open");
	write_n(fd, 11, "file");
	must(pipe(pipefd) == 0, "pipe");
	write_n(pipefd[1], 12, "pipe");
	fd = open("/dev/null", O_WRONLY);
	must(fd >= 0, "/dev/null");
	write_n(fd, 13, "/dev/null");
	write_n(inet_socket(AF_INET, SOCK_STREAM, "127.0.0.1", atoi(argv[3])), 14, "tcp4");
	write_n(inet_socket(AF_INET6, SOCK_STREAM, "::1", atoi(argv[4])), 15, "tcp6");
	fd = unix_socket(SOCK_STREAM, argv[2], 0);
	write_n(fd, 16, "unix");
	close(fd);
	write_n(inet_socket(AF_INET, SOCK_DGRAM, "127.0.0.1", atoi(argv[5])), 17, "udp4");
	write_n(unix_socket(SOCK_STREAM, argv[6], 1), 18, "unix abstract");
	snprintf(unlinked, sizeof(unlinked), "%s.unlinked", argv[1]);
	fd = open(unlinked, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	must(fd >= 0 && unlink(unlinked) == 0, "unlinked");
	write_n(fd, 19, "unlinked");
	fd = eventfd(0, 0);
	must(fd >= 0, "eventfd");
	write_n(fd, 8, "eventfd");
	write_n(unix_socket(SOCK_STREAM, argv[7], 0), 20, "unix 2");
	reconnect_dgram(argv[2]);
	return 0;
}
