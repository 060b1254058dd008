// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Node inspector guard: while the agent hooks a Node process, its
 * inspector (an open door to code execution as the process's user) is
 * reachable by the agent alone. cgroup/connect4 and connect6 on the cgroup v2
 * root run for every connect(2) of every process (and TCP Fast Open's
 * sendmsg), in every network namespace; one to a guarded port of a local
 * address, from any process but the agent's, is refused (EPERM) and
 * recorded. A listener on 127.0.0.1 is reached through any 127/8 address,
 * 0.0.0.0, ::ffff:127.x and ::ffff:0.0.0.0; one on ::1 through ::1 and ::.
 *
 * sock:inet_sock_set_state keeps the TCP sockets that started listening on a
 * guarded port, while they listen: the agent looks for an inspector in
 * /proc/PID/net/tcp{,6} (the kernel walks its whole TCP table per read) only
 * while one does. The state changes as listen(2) starts, so a socket is kept
 * from before it can be reached, whatever its inode.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "guard.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* the agent's tgid: its connects pass */
const volatile __u32 agent_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KR_GUARD_MAX_PORTS);
	__type(key, struct kr_guard_key);
	__type(value, __u8); /* a set: the value is not read */
} guarded SEC(".maps");

/*
 * Every refusal since the guard was loaded, in one counter: a count kept in a port's entry is lost
 * with the entry when its refusal lands between the agent's read and its delete, as a poller's do.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} refused_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} intrusions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KR_GUARD_MAX_LISTENERS);
	__type(key, __u64); /* the sock */
	__type(value, struct kr_guard_key);
} listeners SEC(".maps");

/* listeners the full table could not keep: the agent then reads /proc for every port */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} listeners_lost SEC(".maps");

/* 1: pass; 0: refused (EPERM) */
static __always_inline int check(struct bpf_sock_addr *ctx, int local, __u32 family)
{
	struct kr_guard_key key = {};
	__u32 zero = 0;
	__u64 *refused;
	__u64 id;

	if (!local || ctx->type != SOCK_STREAM)
		return 1;
	key.netns_cookie = bpf_get_netns_cookie(ctx);
	key.port = bpf_ntohs((__u16)ctx->user_port);
	if (!bpf_map_lookup_elem(&guarded, &key))
		return 1;
	id = bpf_get_current_pid_tgid();
	if ((__u32)(id >> 32) == agent_tgid)
		return 1;
	refused = bpf_map_lookup_elem(&refused_total, &zero);
	if (refused)
		__sync_fetch_and_add(refused, 1);
	struct kr_guard_intrusion *rec = bpf_ringbuf_reserve(&intrusions, sizeof(*rec), 0);
	if (rec) {
		rec->netns_cookie = key.netns_cookie;
		rec->pid = id >> 32;
		rec->uid = (__u32)bpf_get_current_uid_gid();
		rec->port = key.port;
		rec->family = family;
		bpf_get_current_comm(rec->comm, sizeof(rec->comm));
		bpf_ringbuf_submit(rec, 0);
	}
	return 0;
}

/* 127.0.0.0/8 or 0.0.0.0, in network order */
static __always_inline int local4(__u32 addr)
{
	__u32 host = bpf_ntohl(addr);
	return host == 0 || (host >> 24) == 127;
}

SEC("cgroup/connect4")
int guard_connect4(struct bpf_sock_addr *ctx)
{
	return check(ctx, local4(ctx->user_ip4), 4);
}

SEC("cgroup/connect6")
int guard_connect6(struct bpf_sock_addr *ctx)
{
	__u32 a0 = ctx->user_ip6[0], a1 = ctx->user_ip6[1], a2 = ctx->user_ip6[2], a3 = ctx->user_ip6[3];
	int local = 0;

	if (a0 == 0 && a1 == 0) {
		/* :: and ::1 */
		if (a2 == 0 && (a3 == 0 || a3 == bpf_htonl(1)))
			local = 1;
		/* ::ffff:a.b.c.d, the IPv4 address mapped */
		else if (a2 == bpf_htonl(0xffff))
			local = local4(a3);
	}
	return check(ctx, local, 6);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(guard_listen, const struct sock *sk, const int oldstate, const int newstate)
{
	struct kr_guard_key key = {};
	__u64 id = (__u64)sk;
	__u32 zero = 0;
	__u64 *lost;

	if (oldstate == TCP_LISTEN) {
		bpf_map_delete_elem(&listeners, &id);
		return 0;
	}
	if (newstate != TCP_LISTEN || sk->sk_protocol != IPPROTO_TCP)
		return 0;
	key.netns_cookie = sk->__sk_common.skc_net.net->net_cookie;
	/* bound before listen(2) (an inspector always is); a port autobound later is the kernel's pick */
	key.port = sk->__sk_common.skc_num;
	if (!bpf_map_lookup_elem(&guarded, &key))
		return 0;
	if (bpf_map_update_elem(&listeners, &id, &key, BPF_ANY)) {
		lost = bpf_map_lookup_elem(&listeners_lost, &zero);
		if (lost)
			__sync_fetch_and_add(lost, 1);
	}
	return 0;
}
