/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * sys_connect, always recorded. A TCP connect is timed by the socket's
 * states (sock:inet_sock_set_state), from the call to SYN_SENT's end in
 * ESTABLISHED or CLOSE, however the caller waits (blocking, poll, epoll):
 * ret is 0, or the connection's error. Other connects (unix, UDP) and
 * those that fail before a SYN is sent are timed by the call itself.
 */
#ifndef KREPLAY_CAPTURE_CONNECT_H
#define KREPLAY_CAPTURE_CONNECT_H

#include "../capture.h"
#include "maps.h"
#include "restarts.h"
#include "targets.h"
#include "units.h"
#include "golang.h"
#include "calls.h"
#include "reads.h"

#define KR_EINTR 4
#define KR_ECONNABORTED 103
#define KR_EALREADY 114
#define KR_EINPROGRESS 115

/* A TCP connect between its SYN and its answer; everything its event needs but the end. */
struct kr_connect {
	__u64 start_ns;
	__u64 cgroup_id;
	__u64 context_id;
	__u64 target_id;
	__u32 pid;
	__u32 tid;
	__s32 fd;
	__u32 syscall;
	char comm[KR_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* the sock */
	__type(value, struct kr_connect);
} connects SEC(".maps");

/* The peer is known only once the call runs: the target waits for the SYN or the exit. */
SEC("tracepoint/syscalls/sys_enter_connect")
int sys_enter_connect(struct trace_event_raw_sys_enter *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 code = KR_SYS_CONNECT;
	struct kr_thread *t;

	go_refresh(pid_tgid);
	t = call_thread(pid_tgid, &code);
	if (!t)
		return 0;
	t->fd = ctx->args[0];
	t->messages = ctx->args[1];
	t->addr_len = ctx->args[2];
	t->target_id = 0;
	t->sock = 0;
	t->count = 0;
	t->syscall = code;
	t->type = KR_RECORD_SYS_CONNECT;
	/* a restarted TCP connect keeps its sock: the state changes of its first entry's SYN time it */
	if (t->parked)
		call_resume(t, (__u32)pid_tgid, KR_RECORD_SYS_CONNECT, code, t->fd, 0, true);
	call_start(t);
	return 0;
}

static __always_inline void emit_connect(struct kr_connect *c, __s64 ret, __u64 now)
{
	struct kr_event *e = reserve_call(KR_RECORD_SYS_CONNECT, c->start_ns, now, 0);

	if (!e)
		return;
	e->cgroup_id = c->cgroup_id;
	e->context_id = c->context_id;
	e->pid = c->pid;
	e->tid = c->tid;
	__builtin_memcpy(e->comm, c->comm, sizeof(e->comm));
	e->call.ret = ret;
	e->call.count = 0;
	e->call.fd = c->fd;
	e->call.syscall = c->syscall;
	e->call.target_id = c->target_id;
	e->call.response_ns = 0;
	submit_call(e, KR_RECORD_SYS_CONNECT);
}

/* SYN_SENT comes in the connecting task, inside connect(); the answer usually in softirq. */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(inet_sock_set_state, const struct sock *sk, const int oldstate, const int newstate)
{
	__u64 key = (__u64)sk;
	struct kr_connect c = {}, *found;
	struct kr_thread *t;
	__u64 pid_tgid;
	__u32 tid;
	int err;
	__u8 one = 1;

	if (oldstate == TCP_SYN_RECV && newstate == TCP_ESTABLISHED) {
		bpf_map_update_elem(&accepted_socks, &key, &one, BPF_ANY);
		return 0;
	}
	/* a close (or the connection's end) ends a server's request, or a call out's (units.h) */
	if (newstate == TCP_FIN_WAIT1 || newstate == TCP_LAST_ACK || newstate == TCP_CLOSE)
		conn_ended(key);
	/* a sock's memory may come back as another connection: an accepted one is forgotten at its end */
	if (newstate == TCP_CLOSE || newstate == TCP_SYN_SENT) {
		bpf_map_delete_elem(&accepted_socks, &key);
		bpf_map_delete_elem(&conns, &key);
		/* a sock's memory coming back as another connection starts with no send nor answer */
		bpf_map_delete_elem(&last_sends, &key);
		bpf_map_delete_elem(&answers, &key);
	}
	if (newstate == TCP_SYN_SENT) {
		pid_tgid = bpf_get_current_pid_tgid();
		tid = (__u32)pid_tgid;
		t = current_thread();
		if (!t || t->type != KR_RECORD_SYS_CONNECT)
			return 0;
		c.start_ns = t->start_ns;
		c.cgroup_id = current_cgroup_id();
		c.context_id = t->context_id;
		c.target_id = targets_enabled ? call_target(t, t->fd) : 0;
		c.pid = pid_tgid >> 32;
		c.tid = tid;
		c.fd = t->fd;
		c.syscall = t->syscall;
		__builtin_memcpy(c.comm, t->comm, sizeof(c.comm));
		/* the exit now knows the state changes own this connect */
		t->sock = key;
		if (bpf_map_update_elem(&connects, &key, &c, BPF_ANY))
			count_event(KR_COUNTER_CONNECT_TABLE_FULL);
		return 0;
	}
	if (oldstate != TCP_SYN_SENT || (newstate != TCP_ESTABLISHED && newstate != TCP_CLOSE))
		return 0;
	found = bpf_map_lookup_elem(&connects, &key);
	if (!found)
		return 0;
	err = newstate == TCP_ESTABLISHED ? 0 : sk->sk_err;
	if (newstate == TCP_CLOSE && !err) {
		/* closed without an error inside connect() itself: it failed before its SYN, its exit says
		 * why */
		t = current_thread();
		if (t && t->type == KR_RECORD_SYS_CONNECT && t->sock == key)
			return 0;
		/* else the caller closed the socket before an answer came (its own timeout) */
		err = KR_ECONNABORTED;
	}
	c = *found;
	bpf_map_delete_elem(&connects, &key);
	emit_connect(&c, -err, bpf_ktime_get_boot_ns());
	return 0;
}

/*
 * A connect that failed before its socket had a peer (a unix path that is
 * not there or refuses, an unreachable network): the target is the address
 * the caller asked for, as strace shows it, not the peerless socket. Not
 * cached: the socket's own stamp does not tell one asked address from another.
 * Sets *socket when the socket's own target names it after all (it has a peer,
 * or the address is of no family it knows): one call_target in the caller
 * serves every such case, which keeps the program within the verifier's bounds.
 */
static __always_inline __u64 asked_target(struct kr_thread *t, bool *socket)
{
	struct kr_target_probe p = {};
	struct kr_target *rec;
	__u16 family = 0;
	__u32 len = t->addr_len;
	void *addr = (void *)t->messages;
	struct sock *sk;
	__u64 id;

	known_target(t, t->fd, &p);
	*socket = true;
	if (!p.file || p.kind != KR_TARGET_SOCKET || len <= sizeof(family) ||
	    bpf_probe_read_user(&family, sizeof(family), addr))
		return 0;
	/* a kernel type: BPF_CORE_READ on p.sk would relocate kreplay's own struct */
	sk = p.sk;
	if (family == KR_AF_UNIX ? BPF_CORE_READ((struct unix_sock *)sk, peer) != NULL
				 : BPF_CORE_READ(sk, __sk_common.skc_dport) != 0)
		return 0;
	if (family != KR_AF_UNIX && !(family == KR_AF_INET && len >= sizeof(struct sockaddr_in)) &&
	    !(family == KR_AF_INET6 && len >= sizeof(struct sockaddr_in6)))
		return 0;
	*socket = false;
	id = new_target_id();
	rec = target_head(&p, id);
	if (!rec)
		return 0;
	rec->family = family;
	rec->protocol = family == KR_AF_UNIX ? BPF_CORE_READ_BITFIELD_PROBED(sk, sk_type)
					     : BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol);
	len -= sizeof(family);
	if (family == KR_AF_UNIX) {
		/* a path name ends at its NUL; an abstract one (first byte 0) is all len bytes */
		if (len > sizeof(((struct sockaddr_un *)0)->sun_path))
			len = sizeof(((struct sockaddr_un *)0)->sun_path);
		barrier_var(len);
		if (bpf_probe_read_user(rec->data, len & 127, addr + sizeof(family))) {
			*socket = true;
			return 0;
		}
		if (rec->data[0]) {
			long n = bpf_probe_read_user_str(rec->data, len & 127, addr + sizeof(family));

			len = n > 0 ? n : 0;
		}
	} else if (family == KR_AF_INET) {
		struct sockaddr_in in = {};

		bpf_probe_read_user(&in, sizeof(in), addr);
		rec->port = bpf_ntohs(in.sin_port);
		__builtin_memcpy(rec->addr, &in.sin_addr, sizeof(in.sin_addr));
		len = 0;
	} else {
		struct sockaddr_in6 in6 = {};

		bpf_probe_read_user(&in6, sizeof(in6), addr);
		rec->port = bpf_ntohs(in6.sin6_port);
		__builtin_memcpy(rec->addr, &in6.sin6_addr, sizeof(rec->addr));
		len = 0;
	}
	return output_target(rec, len) ? id : 0;
}

SEC("tracepoint/syscalls/sys_exit_connect")
int sys_exit_connect(struct trace_event_raw_sys_exit *ctx)
{
	__u64 pid_tgid, key, now;
	__s64 ret = ctx->ret;
	struct kr_thread *t = call_exit(KR_RECORD_SYS_CONNECT, ret, &pid_tgid);
	struct kr_connect c, *found;

	if (!t)
		return 0;
	/* still under way: the state changes will tell how it ends */
	if (ret == -KR_EINPROGRESS || ret == -KR_EALREADY)
		return 0;
	now = bpf_ktime_get_boot_ns();
	if (!t->sock) {
		bool socket = ret >= 0;

		t->target_id = 0;
		if (targets_enabled && !socket)
			t->target_id = asked_target(t, &socket);
		if (targets_enabled && socket)
			t->target_id = call_target(t, t->fd);
		call_end(t, KR_RECORD_SYS_CONNECT, pid_tgid, ret, 0, now, 0, t->context_id);
		return 0;
	}
	if (ret >= 0 || ret == -KR_EINTR)
		return 0;
	/* a SYN was sent, but the call failed in a way no state change reported */
	key = t->sock;
	found = bpf_map_lookup_elem(&connects, &key);
	if (!found)
		return 0;
	c = *found;
	bpf_map_delete_elem(&connects, &key);
	emit_connect(&c, ret, now);
	return 0;
}

#endif /* KREPLAY_CAPTURE_CONNECT_H */
