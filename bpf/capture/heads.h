/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Request-head sniffing: the context (transaction) a thread works for, from
 * a KREPLAY-CTX marker or an HTTP/1.x head it writes or sends, or an HTTP
 * request head it reads from a socket.
 */
#ifndef KREPLAY_CAPTURE_HEADS_H
#define KREPLAY_CAPTURE_HEADS_H

#include "../capture.h"
#include "maps.h"
#include "lifetime.h"
#include "targets.h"
#include "units.h"
#include "goprocs.h"

#define KR_MAX_IOVECS 64
/* how a call names its buffer */
#define KR_BUF 0
#define KR_IOV 1
#define KR_MSG 2
#define KR_MMSG 3
#define KR_NO_BUF 4

#define W4(a, b, c, d) ((__u32)(a) | (__u32)(b) << 8 | (__u32)(c) << 16 | (__u32)(d) << 24)
#define W8(a, b, c, d, e, f, g, h) ((__u64)W4(a, b, c, d) | (__u64)W4(e, f, g, h) << 32)
#define LOW(w, n) ((w) & ((1ULL << ((n)*8)) - 1))
#define LETTER(c) (1U << ((c) - 'A'))
/* first letters of "HTTP/1." and of the method tokens */
#define HTTP_FIRST_LETTERS                                                                                   \
	(LETTER('C') | LETTER('D') | LETTER('G') | LETTER('H') | LETTER('O') | LETTER('P') | LETTER('T'))
/* "GET " and "PUT " are the shortest tokens */
#define MIN_TOKEN_LEN 4

static __always_inline bool is_marker(__u64 w0, __u64 w1, __u64 len)
{
	char next = w1 >> 24;

	if (w0 != W8('K', 'R', 'E', 'P', 'L', 'A', 'Y', '-') || LOW(w1, 3) != W4('C', 'T', 'X', 0))
		return false;
	return (len == 11 && !next) || next == ' ' || next == '\t' || next == '\n' || next == '\r';
}

static __always_inline bool is_http_request(__u64 w0)
{
	return LOW(w0, 4) == W4('G', 'E', 'T', ' ') || LOW(w0, 4) == W4('P', 'U', 'T', ' ') ||
	       LOW(w0, 5) == W8('P', 'O', 'S', 'T', ' ', 0, 0, 0) ||
	       LOW(w0, 5) == W8('H', 'E', 'A', 'D', ' ', 0, 0, 0) ||
	       LOW(w0, 6) == W8('P', 'A', 'T', 'C', 'H', ' ', 0, 0) ||
	       LOW(w0, 6) == W8('T', 'R', 'A', 'C', 'E', ' ', 0, 0) ||
	       LOW(w0, 7) == W8('D', 'E', 'L', 'E', 'T', 'E', ' ', 0) ||
	       w0 == W8('O', 'P', 'T', 'I', 'O', 'N', 'S', ' ') ||
	       w0 == W8('C', 'O', 'N', 'N', 'E', 'C', 'T', ' ');
}

/* "HTTP/1.": a response's status line, not a request line */
static __always_inline bool is_http_response(__u64 w0)
{
	return LOW(w0, 7) == W8('H', 'T', 'T', 'P', '/', '1', '.', 0);
}

/* A write that is a runtime hook's signal (struct kr_unit_signal), not one of the program's own. */
#define KR_UNIT_SIGNAL 0x100
/* A write of the HTTP/2 preface: a client opens a multiplexed connection. */
#define KR_H2_PREFACE 0x101
/* A write of an HTTP/1.x response head: a KR_CONTEXT_HTTP head, which a server's connection may not need. */
#define KR_HTTP_RESPONSE 0x102

static __always_inline bool is_unit_signal(__u64 w0, __u64 w1)
{
	return w0 == W8('K', 'R', 'E', 'P', 'L', 'A', 'Y', '-') && LOW(w1, 4) == W4('U', 'N', 'I', 'T');
}

/* "PRI * HTTP/2.0": an HTTP/2 connection's preface, the client's first bytes */
static __always_inline bool is_h2_preface(__u64 w0)
{
	return w0 == W8('P', 'R', 'I', ' ', '*', ' ', 'H', 'T');
}

/*
 * Classifies a write by its first bytes: a context marker, a runtime's unit
 * signal, an HTTP/1.x head, or 0 for everything else. The common case costs
 * one 16-byte read and a first-letter test.
 */
static __always_inline __u32 context_kind(const void *data, __u64 len)
{
	__u64 w[2] = {};
	__u64 n = len;
	__u32 first;

	if (len < MIN_TOKEN_LEN)
		return 0;
	barrier_var(n);
	if (n > sizeof(w))
		n = sizeof(w);
	/* bytes past len stay 0, so no token can match beyond the write */
	if (bpf_probe_read_user(w, n, data))
		return 0;
	first = (__u8)w[0] - 'A';
	if (first == 'K' - 'A') {
		if (is_marker(w[0], w[1], len))
			return KR_CONTEXT_MARKER;
		return len >= sizeof(struct kr_unit_signal) && is_unit_signal(w[0], w[1]) ? KR_UNIT_SIGNAL
											  : 0;
	}
	if (first > 'Z' - 'A' || !(LETTER('A' + first) & HTTP_FIRST_LETTERS))
		return 0;
	if (is_h2_preface(w[0]))
		return KR_H2_PREFACE;
	if (is_http_response(w[0]))
		return KR_HTTP_RESPONSE;
	return is_http_request(w[0]) ? KR_CONTEXT_HTTP : 0;
}

/*
 * The connection whose request head set a thread's context: a socket's
 * struct file for plaintext, the SSL object for TLS (tls.h). A thread that
 * reads heads from a second connection interleaves requests (an event loop,
 * a pool thread serving one connection after another): which request its
 * later work is for is not known, so its context is cleared and heads no
 * longer set one; its events go without a transaction, counted, never with
 * another request's. A thread-per-connection server reads one connection per
 * thread (its keep-alive requests one after another) and keeps exact
 * contexts. LRU: the entries of exited threads are evicted; a reused thread
 * id can only lose contexts, never gain a wrong one.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64); /* the connection, or KR_INTERLEAVING */
} head_threads SEC(".maps");

#define KR_INTERLEAVING 1

static __always_inline bool thread_interleaves(__u32 tid)
{
	__u64 *owner = bpf_map_lookup_elem(&head_threads, &tid);

	return owner && *owner == KR_INTERLEAVING;
}

/*
 * The thread started before the capture: if it is an event loop, requests whose heads it read before
 * are in flight, and its first head seen here would set their work's context too.
 */
static __always_inline bool thread_predates_capture(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return task->start_time < capture_started_ns;
}

#define KR_O_NONBLOCK 04000

/*
 * Whether the head's socket blocks its reader: a thread that waits on one connection alone (a
 * thread per connection), not a loop, which never blocks on one of many.
 */
static __always_inline bool read_blocks(__u64 sk)
{
	struct socket *sock = sk ? BPF_CORE_READ((struct sock *)sk, sk_socket) : NULL;
	struct file *file = sock ? BPF_CORE_READ(sock, file) : NULL;

	return file && !(BPF_CORE_READ(file, f_flags) & KR_O_NONBLOCK);
}

/* Whether a request head read from connection `conn` may set thread `tid`'s context. */
static __always_inline bool head_owns_thread(__u32 tid, __u64 conn, __u64 sk)
{
	__u64 *owner = bpf_map_lookup_elem(&head_threads, &tid);
	__u64 interleaving = KR_INTERLEAVING;
	struct kr_thread *t;

	/* which request an older loop's work is for is never known: its heads set none, as a loop's do */
	if (!owner && thread_predates_capture() && !read_blocks(sk)) {
		bpf_map_update_elem(&head_threads, &tid, &interleaving, BPF_NOEXIST);
		count_event(KR_COUNTER_INTERLEAVED_HEAD);
		return false;
	}
	if (!owner)
		return !bpf_map_update_elem(&head_threads, &tid, &conn, BPF_NOEXIST);
	if (*owner == conn)
		return true;
	*owner = KR_INTERLEAVING;
	count_event(KR_COUNTER_INTERLEAVED_HEAD);
	t = current_thread();
	if (t && t->context_id) {
		/* what it created meanwhile (an event loop's pool) may serve any request: lease ended */
		if (t->lease)
			request_ended(thread_lease_id(t));
		thread_hold(t, 0, 0);
		forget_thread_context(tid);
	}
	return false;
}

/*
 * Puts a context record into the ring now, at sys_enter: every event that
 * will carry its id is reserved later, so user space always reads the
 * context first. Returns its id, 0 when the ring was full (counted).
 */
static __always_inline struct kr_context *context_reserve(__u32 kind, __u64 parent_id, __u64 pid_tgid)
{
	struct kr_context *rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);

	if (!rec) {
		count_event(KR_COUNTER_CONTEXT_DROPPED);
		return NULL;
	}
	rec->type = KR_RECORD_CONTEXT;
	rec->size = sizeof(*rec);
	rec->context_id = __sync_fetch_and_add(&last_context_id, 1) + 1;
	rec->parent_id = parent_id;
	rec->at_ns = bpf_ktime_get_boot_ns();
	rec->pid = pid_tgid >> 32;
	rec->tid = (__u32)pid_tgid;
	rec->kind = kind;
	return rec;
}

/* Submits a reserved record whose data holds len bytes; returns its id. */
static __always_inline __u64 context_submit(struct kr_context *rec, __u32 len)
{
	__u64 id = rec->context_id;

	rec->len = len;
	submit(rec, sizeof(*rec));
	count_event(KR_COUNTER_CONTEXT_EMITTED);
	return id;
}

static __always_inline __u64 open_record_after(__u32 kind, __u64 parent_id, __u64 pid_tgid, __u64 prefix,
					       __u64 prefix_len, const void *data, __u64 len)
{
	struct kr_context *rec = context_reserve(kind, parent_id, pid_tgid);
	__u64 n = len, at = prefix_len & 7;

	if (!rec)
		return 0;
	/* clamped right at each call, where the verifier still sees the bound */
	barrier_var(n);
	if (!at) {
		if (n > KR_CTX_DATA_LEN)
			n = KR_CTX_DATA_LEN;
		if (bpf_probe_read_user(rec->data, n, data))
			n = 0;
	} else {
		/* the bytes an earlier read brought first (a head's start), then the data */
		__builtin_memcpy(rec->data, &prefix, sizeof(prefix));
		if (n > KR_CTX_DATA_LEN - 8)
			n = KR_CTX_DATA_LEN - 8;
		if (bpf_probe_read_user(rec->data + at, n, data))
			n = 0;
	}
	return context_submit(rec, n ? n + at : 0);
}

static __always_inline __u64 open_record(__u32 kind, __u64 parent_id, __u64 pid_tgid, const void *data,
					 __u64 len)
{
	return open_record_after(kind, parent_id, pid_tgid, 0, 0, data, len);
}

/*
 * The thread's context is now the record's: a lost record leaves it none,
 * never the one it had. A marker's lasts until replaced. A request the
 * thread sends (a call out) lasts no longer than what it was made in, or
 * the thread's work after its request (or after the call, for a thread that
 * had none) would be the call's:
 *   - under a request (a lease): that request's lease, which it keeps;
 *   - else (a marker's, or none): a request of its own, ended by its
 *     connection's close (KR_CONN_CALL, units.h) or the thread's next head or
 *     marker; the thread then carries what it had before the call again. Not
 *     by its answer's status line: a client's work on the answer comes after
 *     it (curl writes the body it reads), and which read ends a body is not
 *     known. A call on a pooled keep-alive connection lasts until the next.
 */
static __always_inline void open_context(struct kr_thread *t, __u32 kind, __u64 pid_tgid, const void *data,
					 __u64 len)
{
	bool leased = t->lease && !thread_in_own_call(t);
	/* a call out of the thread's own request (a head it read) stays its own: no job replaces it */
	bool own_request = leased && t->owned;
	__u64 outer = t->lease ? t->outer : t->context_id, request = thread_lease_id(t);
	__u32 lease = t->lease;

	if (thread_in_own_call(t))
		request_ended(t->context_id);
	thread_hold(t, open_record(kind, t->context_id, pid_tgid, data, len), 0);
	if (kind != KR_CONTEXT_MARKER && t->context_id && leased) {
		t->lease = lease;
		t->lease_id = request;
	} else if (kind != KR_CONTEXT_MARKER && t->context_id) {
		request_opened(t->context_id);
		t->lease = KR_COUNTER_OUTLIVED_THREAD;
		t->lease_id = t->context_id;
		t->outer = outer;
	}
	/* else a head it sends as a client is the job's it runs, which the next job replaces */
	t->owned = kind == KR_CONTEXT_MARKER || (own_request && t->context_id);
	if (t->context_id)
		mark_context_thread((__u32)pid_tgid);
	else
		forget_thread_context((__u32)pid_tgid);
	/* a goroutine's marker is the goroutine's: its thread runs another goroutine next */
	if (t->unit_kind == KR_UNIT_GOROUTINE)
		unit_set_context(pid_tgid >> 32, KR_UNIT_GOROUTINE, t->unit,
				 t->context_id ? t->context_id | KR_OWNED : 0);
}

/*
 * A queue's hand-off (KR_UNIT_ADOPT): a plain thread takes the context its
 * job's putter handed unit `unit` (a lease on its request; none for a job
 * put with no unit), whatever it carried before (its creator's request, the
 * last job's), unless it serves a request of its own (a head it read, its
 * marker) or runs a runtime's units (their contexts are its). The unit was
 * made for this one job: consumed.
 */
static __always_inline struct kr_thread *unit_adopt(struct kr_thread *t, __u64 pid_tgid, __u64 unit)
{
	__u64 handle = unit_context(pid_tgid >> 32, KR_UNIT_HOOK, unit);

	unit_set_context(pid_tgid >> 32, KR_UNIT_HOOK, unit, 0);
	if (!t && handle)
		t = thread_entry();
	if (!t || t->unit_kind || (t->owned && t->context_id))
		return t;
	thread_hold(t, handle, KR_COUNTER_OUTLIVED_THREAD);
	t->owned = 0;
	if (t->context_id)
		mark_context_thread((__u32)pid_tgid);
	else
		forget_thread_context((__u32)pid_tgid);
	return t;
}

/* Where a WATCH's or KR_UNIT_MAILBOX's bytes keep a thread's slot and mailbox: their unit field. */
static __always_inline __u64 unit_field_at(const void *data)
{
	return (__u64)data + __builtin_offsetof(struct kr_unit_signal, unit);
}

/*
 * A runtime hook's signal (a write to KR_UNIT_SIGNAL_FD): the
 * thread now runs the hook's unit `unit`, or opens it with the request head
 * that follows, or keeps its unit in the signal's own bytes from now on
 * (KR_UNIT_WATCH), or hands its context to unit `unit` (a pool's work item,
 * which another thread enters), or has a mailbox (KR_UNIT_MAILBOX). The
 * write is the hook's, not the program's: never recorded.
 */
static __always_inline struct kr_thread *unit_signal(struct kr_thread *t, __u64 pid_tgid,
						     const struct kr_unit_signal *signal, const void *data,
						     __u64 len)
{
	struct kr_unit_signal sig = *signal;
	__u64 id;

	if (sig.op == KR_UNIT_HANDOFF) {
		/* the thread stays where it is; a thread without an entry has no context to hand */
		unit_set_context(pid_tgid >> 32, KR_UNIT_HOOK, sig.unit, t ? thread_handle(t) : 0);
		return t;
	}
	if (sig.op == KR_UNIT_CLOSE) {
		/* the unit's request is done: whatever runs in the unit, or was handed it, loses it */
		request_ended(unit_context(pid_tgid >> 32, KR_UNIT_HOOK, sig.unit));
		return t;
	}
	if (sig.op == KR_UNIT_ADOPT)
		return unit_adopt(t, pid_tgid, sig.unit);
	if (!t)
		t = thread_entry();
	if (!t)
		return t;
	if (sig.op == KR_UNIT_MAILBOX) {
		/* the thread keeps running what it ran: no unit kind, so its reads and heads stay a plain
		 * thread's */
		t->mailbox = len >= KR_UNIT_MAILBOX_AT + sizeof(sig) ? unit_field_at(data) : 0;
		return t;
	}
	if (sig.op == KR_UNIT_OPEN) {
		/* the unit's own request: no parent, whatever the thread ran before */
		id = open_record(KR_CONTEXT_RUNTIME, 0, pid_tgid, data + sizeof(sig), len - sizeof(sig));
		unit_set_context(pid_tgid >> 32, KR_UNIT_HOOK, sig.unit, request_opened(id));
	} else if (sig.op == KR_UNIT_WATCH) {
		t->unit_slot = unit_field_at(data);
		t->mailbox = len >= KR_UNIT_MAILBOX_AT + sizeof(sig) ? t->unit_slot : 0;
	}
	unit_switch(t, pid_tgid, KR_UNIT_HOOK, sig.unit);
	return t;
}

/*
 * getpriority(PRIO_PROCESS, 0) by a thread with a mailbox (capture.h
 * KR_UNIT_MAILBOX_AT): the signal in it, if any, as if written to
 * KR_UNIT_SIGNAL_FD. A WATCH or KR_UNIT_MAILBOX in a mailbox is ignored: only
 * a write registers memory.
 */
/* The mailbox as one read sees it, from the WATCH signal's unit field on (capture.h). */
struct kr_mailbox {
	__u64 unit;
	__u64 len;
	struct kr_unit_signal sig;
};

_Static_assert(__builtin_offsetof(struct kr_unit_signal, unit) + __builtin_offsetof(struct kr_mailbox, len) ==
		       KR_UNIT_MAILBOX_LEN_AT,
	       "the mailbox's length follows the slot");
_Static_assert(__builtin_offsetof(struct kr_unit_signal, unit) + __builtin_offsetof(struct kr_mailbox, sig) ==
		       KR_UNIT_MAILBOX_AT,
	       "the mailbox's signal follows its length");

SEC("tracepoint/syscalls/sys_enter_getpriority")
int sys_enter_getpriority(struct trace_event_raw_sys_enter *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_mailbox box;
	struct kr_thread *t;
	__u64 w[2];

	if (!attribution_enabled || ctx->args[0] != KR_PRIO_PROCESS || ctx->args[1] != 0)
		return 0;
	t = current_thread();
	if (!t || !t->mailbox)
		return 0;
	/* the unit field, the length and the signal in one read: a WATCH with a mailbox spans them all */
	if (bpf_probe_read_user(&box, sizeof(box), (const void *)t->mailbox) ||
	    box.len < sizeof(struct kr_unit_signal) ||
	    box.len > sizeof(struct kr_unit_signal) + KR_CTX_DATA_LEN)
		return 0;
	/* the magic and the op: what context_kind reads of a write */
	__builtin_memcpy(w, &box.sig, sizeof(w));
	if (!is_unit_signal(w[0], w[1]) || box.sig.op == KR_UNIT_WATCH || box.sig.op == KR_UNIT_MAILBOX)
		return 0;
	unit_refresh(t, pid_tgid);
	/* the mailbox's signal follows its length */
	unit_signal(t, pid_tgid, &box.sig,
		    (const void *)t->mailbox + __builtin_offsetof(struct kr_mailbox, sig), box.len);
	return 0;
}

/* The first non-empty buffer of an iovec array and the total length. */
static __always_inline const void *first_iov(const struct iovec *iov, __u64 iovcnt, __u64 *first_len,
					     __u64 *total)
{
	const void *data = NULL;

	*total = 0;
	for (int i = 0; i < KR_MAX_IOVECS; i++) {
		struct iovec v;

		if (i >= iovcnt || bpf_probe_read_user(&v, sizeof(v), &iov[i]))
			break;
		if (!data && v.iov_len) {
			data = v.iov_base;
			*first_len = v.iov_len;
		}
		*total += v.iov_len;
	}
	return data;
}

/*
 * Whether a response head written to `fd` is sent on a connection it starts
 * no request on, so that it needs no context record: no thread takes it as
 * its context (context_source), and the write's exit (writes.h), its only
 * other reader, gives it to the connection only when the send starts a
 * request there. A send on a server's connection (accepted, or one a request
 * head was read on), a multiplexed or a datagram one starts none
 * (conn_starts_none). A TLS write's plaintext (`fd` -1, SSL_write: its socket
 * not known) is taken as a server's too (a client sends no response head):
 * the enter of the write that sends its ciphertext clears t->opened before
 * anything reads it; so is a write to a negative descriptor, which fails on
 * no connection.
 */
static __always_inline bool response_needs_no_record(__s32 fd)
{
	__u64 stamp = 0;
	struct sock *sk;

	if (fd < 0)
		return true;
	if (!bpf_rdonly_cast)
		return false;
	sk = file_sock(current_file(fd), &stamp);
	return sk && conn_starts_none((__u64)sk, conn_of((__u64)sk, stamp));
}

/*
 * Sets the thread's context when a write or send starts with a marker or
 * an HTTP head (t->opened: the context the head opened, which its
 * connection takes), or switches its unit on a runtime's signal (*signal
 * set: not a call to record). `signal` is NULL for a call that is no
 * signal whatever its bytes: all but a write(2) to KR_UNIT_SIGNAL_FD. `fd`:
 * the descriptor written, -1 for a TLS write's plaintext. Seen for every
 * process, whatever the capture filters: they select events, and a context
 * must be known before its events are. Returns the thread's entry, t or the
 * one made for the context.
 */
static __always_inline struct kr_thread *context_source(struct kr_thread *t, __u64 pid_tgid, __s32 fd,
							const void *data, __u64 len, bool *signal)
{
	struct kr_unit_signal sig;
	__u32 kind;

	if (!attribution_enabled || !data)
		return t;
	kind = context_kind(data, len);
	if (!kind)
		return t;
	if (kind == KR_UNIT_SIGNAL) {
		if (!signal)
			return t;
		*signal = true;
		if (bpf_probe_read_user(&sig, sizeof(sig), data))
			return t;
		return unit_signal(t, pid_tgid, &sig, data, len);
	}
	if (kind == KR_H2_PREFACE) {
		if (t)
			t->preface = 1;
		return t;
	}
	if (!t)
		t = thread_entry();
	if (!t)
		return t;
	if (kind == KR_HTTP_RESPONSE && response_needs_no_record(fd)) {
		/* a server's response to its connection's request is no context, whoever sends it: the
		 * thread keeps the request's lease, which the connection's close or next head ends (issue
		 * 46; a plain thread's response used to become its context, with no lease) */
		t->opened = KR_OPENED_NO_RECORD;
		return t;
	}
	if (kind != KR_CONTEXT_MARKER && (t->unit_kind || thread_interleaves((__u32)pid_tgid))) {
		/* a head such a thread sends (a proxy's, a client's call out) is its connection's request
		 * only */
		t->opened = open_record(KR_CONTEXT_HTTP, t->context_id, pid_tgid, data, len);
		return t;
	}
	/* a plain thread's own head (a client's call out; a response on a connection not known to serve
	 * one) is its context from now on: its record is needed */
	open_context(t, kind == KR_HTTP_RESPONSE ? KR_CONTEXT_HTTP : kind, pid_tgid, data, len);
	t->opened = t->context_id;
	return t;
}

/*
 * Whether a context program looks at the current task: every task but this
 * one, except that with --filter-transactions an excluded task is not looked
 * at at all (its events would be dropped with their context). `wanted`:
 * current_wanted's verdict, which a caller that has it passes on (read only
 * under --filter-transactions).
 */
static __always_inline bool context_watched_by(__u64 pid_tgid, bool wanted)
{
	return pid_tgid >> 32 != self_tgid && (!filter_transactions || wanted);
}

static __always_inline bool context_watched(__u64 pid_tgid)
{
	return context_watched_by(pid_tgid, filter_transactions && current_wanted(pid_tgid >> 32));
}

/*
 * A server read that brought only the first bytes of a method token (Go's
 * net/http peeks one byte of the next request while a handler runs): kept
 * per sock, so the read that brings the rest is known as the head it is.
 */
struct kr_head_prefix {
	__u64 bytes;
	__u64 len;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64); /* the sock */
	__type(value, struct kr_head_prefix);
} head_prefixes SEC(".maps");

#define KR_MAX_PREFIX 7

/* Whether the first `len` bytes of w begin a method token. */
static __always_inline bool is_request_prefix(__u64 w, __u64 len)
{
	static const __u64 tokens[] = {
		W8('G', 'E', 'T', ' ', 0, 0, 0, 0),	    W8('P', 'U', 'T', ' ', 0, 0, 0, 0),
		W8('P', 'O', 'S', 'T', ' ', 0, 0, 0),	    W8('H', 'E', 'A', 'D', ' ', 0, 0, 0),
		W8('P', 'A', 'T', 'C', 'H', ' ', 0, 0),	    W8('T', 'R', 'A', 'C', 'E', ' ', 0, 0),
		W8('D', 'E', 'L', 'E', 'T', 'E', ' ', 0),   W8('O', 'P', 'T', 'I', 'O', 'N', 'S', ' '),
		W8('C', 'O', 'N', 'N', 'E', 'C', 'T', ' '),
	};

	if (!len || len > KR_MAX_PREFIX)
		return false;
	for (int i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
		if (LOW(w, len) == LOW(tokens[i], len))
			return true;
	}
	return false;
}

/*
 * A request head was read from a connection (`owner`: a socket's file, or
 * the SSL object for TLS) on `sock`: the connection now serves it, and so
 * does the reader when the reader serves one request at a time:
 *   - a thread running a unit that does its own reads (a goroutine): that
 *     unit, not the thread;
 *   - a thread running a hook's units (Node, asyncio: reads between them): none;
 *     the unit's hook opens the request's context itself;
 *   - a plain thread: the thread, while it reads one connection only
 *     (head_owns_thread).
 * The HTTP/2 preface (`flags` KR_CONN_MULTIPLEXED) is read the same way with
 * no request: the connection now carries many at once, and its reader serves
 * them all (after an h2c Upgrade, the reader read the upgrading request's
 * head; the streams that follow are not that request).
 */
static __always_inline void head_read(__u64 pid_tgid, __u64 owner, __u64 sock, __u64 stamp, __u32 flags,
				      __u64 prefix, __u64 prefix_len, const void *buf, __u64 len)
{
	__u32 tid = (__u32)pid_tgid;
	struct kr_thread *t = current_thread();
	bool preface = flags & KR_CONN_MULTIPLEXED;
	bool owns_thread = false;
	__u64 id = 0, handle;

	if (!t || !t->unit_kind)
		t = go_detect(t, pid_tgid);
	if (!t || !t->unit_kind) {
		owns_thread = head_owns_thread(tid, owner, sock);
		if (owns_thread)
			t = thread_entry();
		if (owns_thread && !t)
			return;
	}
	if (!preface)
		id = open_record_after(KR_CONTEXT_HTTP_REQUEST, owns_thread ? t->context_id : 0, pid_tgid,
				       prefix, prefix_len, buf, len);
	/* a request's: it lives until the connection's next head or its close (lifetime.h) */
	handle = request_opened(id);
	if (t && t->unit_kind && unit_owns_reads(t) && t->unit) {
		/* the goroutine's own request: a hand-off does not replace it */
		unit_set_context(pid_tgid >> 32, t->unit_kind, t->unit, handle ? handle | KR_OWNED : 0);
		thread_hold(t, handle, unit_outlived(t->unit_kind));
	} else if (owns_thread) {
		thread_hold(t, handle, KR_COUNTER_OUTLIVED_THREAD);
		t->owned = 1;
		if (t->context_id)
			mark_context_thread(tid);
		else
			forget_thread_context(tid);
	}
	conn_serve(sock, stamp, id, preface ? flags : flags | KR_CONN_SERVER);
}

/*
 * The first bytes `w` of `got` a server read from a connection (`owner` on
 * `sock`, `flags` its kr_conn_flag: KR_CONN_SERVER when the reader knows it
 * serves it): a request head, the HTTP/2 preface, the first bytes of a
 * method token (kept per sock), or the rest of a token an earlier read
 * began. The caller has seen that w begins with upper case or a space.
 */
static __always_inline void head_bytes(__u64 pid_tgid, __u64 owner, __u64 sock, __u64 stamp, __u32 flags,
				       const void *buf, __u64 got, __u64 w)
{
	struct kr_head_prefix *prefix;
	__u64 start, start_len;

	if (got >= MIN_TOKEN_LEN && is_http_request(w)) {
		head_read(pid_tgid, owner, sock, stamp, flags, 0, 0, buf, got);
		return;
	}
	if (got >= sizeof(w) && is_h2_preface(w)) {
		head_read(pid_tgid, owner, sock, stamp, flags | KR_CONN_MULTIPLEXED, 0, 0, buf, got);
		return;
	}
	if (got < sizeof(w) && is_request_prefix(w, got) &&
	    (flags & KR_CONN_SERVER || bpf_map_lookup_elem(&accepted_socks, &sock))) {
		struct kr_head_prefix fresh = {.bytes = w, .len = got};

		bpf_map_update_elem(&head_prefixes, &sock, &fresh, BPF_ANY);
		/* the next request began, which one is not known yet: this read is none's, the last ended */
		conn_serve(sock, stamp, 0, flags | KR_CONN_SERVER);
		return;
	}
	prefix = bpf_map_lookup_elem(&head_prefixes, &sock);
	if (!prefix)
		return;
	start = prefix->bytes;
	start_len = prefix->len & 7;
	bpf_map_delete_elem(&head_prefixes, &sock);
	if (is_http_request(LOW(start, start_len) | w << (start_len * 8)))
		head_read(pid_tgid, owner, sock, stamp, flags, start, start_len, buf, got);
}

/*
 * Incoming requests: a read from a socket may bring an HTTP/1.x request
 * head. One program at syscall exit, nothing at enter: the call's
 * arguments are still in the task's saved registers. A failed read stops at
 * once, anything but a socket after a few direct loads, a socket's data
 * after its first byte unless it is upper case or a space (a method token,
 * the HTTP/2 preface, or the rest of a token a short read began).
 */
static __always_inline void request_head_read(struct trace_event_raw_sys_exit *ctx, __u32 how)
{
	struct pt_regs *regs;
	struct file *file;
	struct sock *sk;
	const void *buf;
	__u64 len, got, pid_tgid, stamp = 0, w = 0;

	if (ctx->ret <= 0 || !bpf_rdonly_cast)
		return;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	file = current_file(PT_REGS_PARM1_SYSCALL(regs));
	if (!file || (file->f_inode->i_mode & KR_S_IFMT) != KR_S_IFSOCK)
		return;
	pid_tgid = bpf_get_current_pid_tgid();
	if (!context_watched(pid_tgid))
		return;
	buf = (const void *)PT_REGS_PARM2_SYSCALL(regs);
	len = PT_REGS_PARM3_SYSCALL(regs);
	if (how != KR_BUF) {
		const struct iovec *iov = buf;
		struct iovec v;

		if (how == KR_MSG) {
			struct user_msghdr m;

			if (bpf_probe_read_user(&m, sizeof(m), buf))
				return;
			iov = m.msg_iov;
			len = m.msg_iovlen;
		}
		/* a head lands in the first buffer: readers put it there */
		if (!len || bpf_probe_read_user(&v, sizeof(v), iov))
			return;
		buf = v.iov_base;
		len = v.iov_len;
	}
	got = ctx->ret;
	if (got > len)
		got = len;
	if (!got || bpf_probe_read_user(&w, got < sizeof(w) ? got & 7 : sizeof(w), buf))
		return;
	/* only upper case or a space can begin or continue a token: most socket data stops here */
	if ((__u8)w != ' ' && ((__u8)w < 'A' || (__u8)w > 'Z'))
		return;
	sk = file_sock(file, &stamp);
	head_bytes(pid_tgid, (__u64)file, (__u64)sk, stamp, 0, buf, got, w);
}

#endif /* KREPLAY_CAPTURE_HEADS_H */
