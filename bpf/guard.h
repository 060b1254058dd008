/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Node inspector guard (inspector_guard.bpf.c), shared with the addon
 * (native/capture/inspector_guard.cc): which ports are the agent's alone, and the
 * record of each connect the kernel refused.
 */
#ifndef KREPLAY_GUARD_H
#define KREPLAY_GUARD_H

/* A guarded port: the network namespace (its cookie) and the TCP port. */
struct kr_guard_key {
	__u64 netns_cookie;
	__u32 port;
	__u32 pad;
};

/* One refused connect: who tried, and where. */
struct kr_guard_intrusion {
	__u64 netns_cookie;
	__u32 pid;
	__u32 uid;
	__u32 port;
	__u32 family;
	char comm[16];
};

#define KR_GUARD_MAX_PORTS 64
/* sockets listening on guarded ports at once: one an inspector, more only if others use them */
#define KR_GUARD_MAX_LISTENERS 256

#endif
