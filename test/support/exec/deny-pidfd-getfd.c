/*
 * deny-pidfd-getfd CMD [ARGS...]: runs CMD under a seccomp filter that fails
 * pidfd_getfd(2) with EPERM, as the default profiles of Docker and containerd
 * do for a process without CAP_SYS_PTRACE. Everything else passes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: deny-pidfd-getfd CMD [ARGS...]\n");
    return 64;
  }
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pidfd_getfd, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("deny-pidfd-getfd: seccomp");
    return 70;
  }
  execvp(argv[1], &argv[1]);
  perror(argv[1]);
  return 127;
}
