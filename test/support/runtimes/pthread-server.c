/*
 * A thread-per-connection HTTP/1.1 server in C: each connection's thread reads request heads one
 * after another (keep-alive); for each, it starts a helper thread that writes
 * DIR/<x-request-id>.helper, joins it, writes DIR/<x-request-id>.handler and answers "ok".
 * Usage: pthread-server DIR (prints its port).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *dir;

static void write_file(const char *id, const char *suffix) {
  char path[512];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s.%s", dir, id, suffix);
  f = fopen(path, "w");
  if (f) {
    fputs(suffix, f);
    fclose(f);
  }
}

static void *helper(void *id) {
  write_file(id, "helper");
  return NULL;
}

/* The x-request-id of the head in buf, into id. */
static void request_id(char *buf, char *id, size_t size) {
  char *line = strcasestr(buf, "\r\nx-request-id: ");
  size_t n = 0;

  snprintf(id, size, "none");
  if (!line) return;
  line += strlen("\r\nx-request-id: ");
  while (line[n] && line[n] != '\r' && n + 1 < size) n++;
  memcpy(id, line, n);
  id[n] = 0;
}

static void *serve(void *arg) {
  int fd = (int)(long)arg;
  char buf[8192], id[256];
  size_t have = 0;
  static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

  for (;;) {
    char *end;
    ssize_t got = read(fd, buf + have, sizeof(buf) - 1 - have);
    pthread_t thread;

    if (got <= 0) break;
    have += got;
    buf[have] = 0;
    end = strstr(buf, "\r\n\r\n");
    if (!end) continue;
    request_id(buf, id, sizeof(id));
    pthread_create(&thread, NULL, helper, id);
    pthread_join(thread, NULL);
    write_file(id, "handler");
    if (write(fd, answer, sizeof(answer) - 1) < 0) break;
    /* GETs without a body: whatever follows the head is the next request's */
    have -= end + 4 - buf;
    memmove(buf, end + 4, have);
  }
  close(fd);
  return NULL;
}

int main(int argc, char **argv) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(addr);
  int listener = socket(AF_INET, SOCK_STREAM, 0);

  if (argc < 2 || listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof(addr)) || listen(listener, 128) ||
      getsockname(listener, (struct sockaddr *)&addr, &len))
    return 1;
  dir = argv[1];
  printf("%d\n", ntohs(addr.sin_port));
  fflush(stdout);
  for (;;) {
    int fd = accept(listener, NULL, NULL);
    pthread_t thread;

    if (fd < 0) continue;
    pthread_create(&thread, NULL, serve, (void *)(long)fd);
    pthread_detach(thread);
  }
}
