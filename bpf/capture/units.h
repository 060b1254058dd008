/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Contexts that do not live on a thread: a connection's, and a runtime unit's.
 *
 * A connection carries the request being served on it: a server's from the
 * head read on it to the next one, a client's from the send that starts a
 * request to the next such send. An event on a socket takes its
 * connection's context whatever thread makes the call, so a reply written
 * by an event loop or a pool thread is its request's.
 *
 * A unit is what a runtime schedules on its threads: a goroutine, a
 * JavaScript async context, a libuv work item. Each has a context of its
 * own; a thread running a unit carries the unit's context while it runs it
 * (unit_switch), and never inherits "the last head it read". Runtime hooks
 * (uprobes, or a signal write from code a runtime runs) switch units; what
 * the hooks of each runtime are lives in the header of that runtime.
 */
#ifndef KREPLAY_CAPTURE_UNITS_H
#define KREPLAY_CAPTURE_UNITS_H

#include "../capture.h"
#include "maps.h"
#include "lifetime.h"
#include "targets.h"

/* A connection's request context; `stamp` tells a sock whose memory came back as another connection. */
struct kr_conn {
	__u64 context_id; /* 0 on a multiplexed connection: no single request owns its calls */
	__u64 stamp;
	__u32 flags; /* enum kr_conn_flag */
	__u32 pad;
};

enum kr_conn_flag {
	/* the HTTP/2 preface was seen: many requests share it, its calls belong to none */
	KR_CONN_MULTIPLEXED = 1,
	/*
	 * a server's TLS connection: a request's head is known only once its bytes were read and
	 * decrypted, so a read may bring the next request while the connection still serves the
	 * last one: its reads carry none
	 */
	KR_CONN_TLS = 2,
	/* a request head was read on it: a server's, whose requests only heads start */
	KR_CONN_SERVER = 4,
	/* a client's, carrying a call out's own context (heads.h open_context): its close ends the call */
	KR_CONN_CALL = 8,
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* the sock */
	__type(value, struct kr_conn);
} conns SEC(".maps");

#define KR_SOCK_STREAM 1

/*
 * A unit's context. LRU: a unit the table lost carries none, never
 * another's. A unit id reused by its runtime (a goroutine's g, a work
 * request's memory) is given a context, or none, when it starts again.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct kr_unit_key);
	__type(value, __u64);
} units SEC(".maps");

/* The socket behind a file, and the stamp (ports, addresses, inode) that tells its connection. */
static __always_inline struct sock *file_sock(struct file *file, __u64 *stamp)
{
	struct sock *sk;

	if (!file || (file->f_inode->i_mode & KR_S_IFMT) != KR_S_IFSOCK)
		return NULL;
	sk = RDONLY(struct socket, file->private_data)->sk;
	*stamp = socket_stamp(sk) ^ file->f_inode->i_ino << 32;
	return sk;
}

static __always_inline struct kr_conn *conn_of(__u64 sock, __u64 stamp)
{
	struct kr_conn *c = bpf_map_lookup_elem(&conns, &sock);

	return c && c->stamp == stamp ? c : NULL;
}

/*
 * `old`: sock's entry, looked up by the caller (NULL: none, or another
 * connection's). The same connection in the same state changes its request
 * alone, one aligned store in place: an LRU update allocates a node and
 * frees the old one, once a request on a server's connection.
 */
static __always_inline void conn_set(struct kr_conn *old, __u64 sock, __u64 stamp, __u64 context_id,
				     __u32 flags)
{
	struct kr_conn c = {
		.context_id = flags & KR_CONN_MULTIPLEXED ? 0 : context_id, .stamp = stamp, .flags = flags};

	if (old && old->stamp == stamp && old->flags == flags)
		old->context_id = c.context_id;
	else if (sock)
		bpf_map_update_elem(&conns, &sock, &c, BPF_ANY);
}

/*
 * A server's connection serves request `context_id` now (0: one not known
 * yet): the request it served before ended (lifetime.h).
 */
static __always_inline void conn_serve(__u64 sock, __u64 stamp, __u64 context_id, __u32 flags)
{
	struct kr_conn *c = sock ? bpf_map_lookup_elem(&conns, &sock) : NULL;

	if (c && c->flags & KR_CONN_SERVER && c->context_id != context_id)
		request_ended(c->context_id);
	conn_set(c, sock, stamp, context_id, flags);
}

/* The connection on `sock` is done (closed, or gone): a server's request ended, a call out's too. */
static __always_inline void conn_ended(__u64 sock)
{
	struct kr_conn *c = bpf_map_lookup_elem(&conns, &sock);

	if (c && c->flags & (KR_CONN_SERVER | KR_CONN_CALL))
		request_ended(c->context_id);
}

/*
 * The context an event of the thread's call carries: its connection's for a
 * call on a socket that has one, else the thread's (its unit's, while it runs
 * one).
 */
static __always_inline __u64 conn_context(struct kr_conn *c)
{
	if (c->flags & KR_CONN_MULTIPLEXED)
		count_event(KR_COUNTER_MULTIPLEXED_CALL);
	return c->context_id;
}

static __always_inline __u64 event_context(struct kr_thread *t)
{
	struct kr_conn *c;

	if (t->sock && (c = conn_of(t->sock, t->sock_stamp)))
		return conn_context(c);
	return t->context_id;
}

/*
 * A read's: as event_context, but none on a server's TLS connection
 * (KR_CONN_TLS) nor for a server's read that began the next request before
 * its head was known (its connection's context 0 then).
 */
static __always_inline __u64 read_context(struct kr_thread *t)
{
	struct kr_conn *c;

	if (!t->sock || !(c = conn_of(t->sock, t->sock_stamp)))
		return t->context_id;
	if (c->flags & KR_CONN_TLS || (c->flags & KR_CONN_SERVER && !c->context_id)) {
		count_event(KR_COUNTER_UNSURE_READ);
		return 0;
	}
	return conn_context(c);
}

/*
 * A send on the thread's socket started a request: on a client's
 * connection, its calls are the sender's request's until the next request
 * (none when the sender has no context). A server's connection (one a
 * listener accepted, or one a head was read on: connections older than the
 * agent) keeps the request its last head started; a multiplexed one none.
 */
/*
 * Whether a send on sock `key` (`c`: its connection's entry, conn_of) starts
 * no request there: a datagram socket has no connection (each of its sends
 * may be another request's), a server's and a multiplexed one keep theirs.
 */
static __always_inline bool conn_starts_none(__u64 key, struct kr_conn *c)
{
	return RDONLY(struct sock, (struct sock *)key)->sk_type != KR_SOCK_STREAM ||
	       (c && c->flags & (KR_CONN_SERVER | KR_CONN_MULTIPLEXED)) ||
	       bpf_map_lookup_elem(&accepted_socks, &key);
}

static __always_inline void conn_request_started(struct kr_thread *t, __u64 context_id)
{
	__u64 key = t->sock;
	struct kr_conn *c = conn_of(key, t->sock_stamp);

	if (conn_starts_none(key, c))
		return;
	if (context_id)
		conn_set(c, key, t->sock_stamp, context_id,
			 context_id == t->context_id && thread_in_own_call(t) ? KR_CONN_CALL : 0);
	else if (c)
		bpf_map_delete_elem(&conns, &key);
}

/* A unit's context handle (lifetime.h), 0: none. */
static __always_inline __u64 unit_context(__u32 tgid, __u32 kind, __u64 id)
{
	struct kr_unit_key key = {.tgid = tgid, .kind = kind, .id = id};
	__u64 *found = id ? bpf_map_lookup_elem(&units, &key) : NULL;

	return found ? *found : 0;
}

static __always_inline void unit_set_context(__u32 tgid, __u32 kind, __u64 id, __u64 handle)
{
	struct kr_unit_key key = {.tgid = tgid, .kind = kind, .id = id};

	__u64 *found;

	if (!id)
		return;
	/* in place when the unit has an entry (a goroutine's next request): no LRU node allocated */
	found = handle ? bpf_map_lookup_elem(&units, &key) : NULL;
	if (found)
		*found = handle;
	else if (handle)
		bpf_map_update_elem(&units, &key, &handle, BPF_ANY);
	else
		bpf_map_delete_elem(&units, &key);
}

/* The kr_counter a unit's holder counts under when its request ends first. */
static __always_inline __u32 unit_outlived(__u32 kind)
{
	return kind == KR_UNIT_GOROUTINE ? KR_COUNTER_OUTLIVED_GOROUTINE : KR_COUNTER_OUTLIVED_UNIT;
}

/*
 * The thread now runs unit `id` of `kind` (0: none) and carries its
 * context. It stays marked for the read programs: which unit it runs next
 * is not known, so its reads are looked at and kept when they carry a
 * context.
 */
static __always_inline void unit_switch(struct kr_thread *t, __u64 pid_tgid, __u32 kind, __u64 id)
{
	__u64 handle = unit_context(pid_tgid >> 32, kind, id);

	t->unit_kind = kind;
	t->unit = id;
	if (handle && !handle_context(handle, unit_outlived(kind))) {
		/* its request ended: the unit carries none from now on, counted once */
		unit_set_context(pid_tgid >> 32, kind, id, 0);
		handle = 0;
	}
	thread_hold(t, handle, unit_outlived(kind));
	mark_context_thread((__u32)pid_tgid);
}

/*
 * Called where a thread's calls begin, before its context is used: a thread
 * whose hook keeps its unit in memory (KR_UNIT_WATCH) takes the unit it runs
 * now, and a context whose request ended is dropped (its unit's too).
 */
static __always_inline void unit_refresh(struct kr_thread *t, __u64 pid_tgid)
{
	__u64 unit;

	if (t->unit_slot && !bpf_probe_read_user(&unit, sizeof(unit), (const void *)t->unit_slot) &&
	    (unit != t->unit || t->unit_kind != KR_UNIT_HOOK))
		unit_switch(t, pid_tgid, KR_UNIT_HOOK, unit);
	if (thread_lease_ended(t, (__u32)pid_tgid) && t->unit_kind)
		unit_set_context(pid_tgid >> 32, t->unit_kind, t->unit, 0);
}

/* Whether the thread's reads happen inside its units (a goroutine's, a work item's), not between them
 * (libuv's). */
static __always_inline bool unit_owns_reads(struct kr_thread *t)
{
	return t->unit_kind != KR_UNIT_HOOK;
}

#endif /* KREPLAY_CAPTURE_UNITS_H */
