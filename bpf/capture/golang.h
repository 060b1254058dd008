/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Go: each goroutine is a unit (units.h) whose id is its g pointer. Go's
 * threads (Ms) run one goroutine after another without a syscall between
 * them, so a Go thread's context is its current goroutine's, read at each
 * syscall's enter from the thread's TLS (go_refresh), never "the last head
 * it read". A request head read by a goroutine gives it the request (the
 * core does this for units that own their reads); the uprobes below pass
 * a context on:
 *   - runtime.newproc1 (its casgstatus(newg, _Gdead, _Grunnable) call, or
 *     its RET sites where that is not found: never a uretprobe on Go, whose
 *     stacks move; the creator read from the runtime, or from newproc1's
 *     entry where the binary has no DWARF): a new goroutine takes its
 *     creator's context, a reused g loses the one it had;
 *   - net/http's client pool: a persistConn's readLoop and writeLoop
 *     goroutines outlive the request that dialed it; the writeLoop takes
 *     the context of each request (*persistConn).roundTrip sends on it, the
 *     readLoop none (its reads carry the connection's);
 *   - net/http's HTTP/2 server: one goroutine serves every stream of a
 *     connection and starts each stream's handler goroutine in
 *     (*http2serverConn).processHeaders; that goroutine, and no other it
 *     starts, takes the stream's request from the HEADERS frame's fields;
 *   - crypto/tls: a server's (*tls.Conn).Read returns a request head's
 *     plaintext to the goroutine that serves it, as a socket read does
 *     over plaintext.
 * User space (native/probes/go_probes.cc) finds Go processes, attaches these to
 * their binaries and fills go_processes; a process it cannot follow (a
 * stripped binary) is marked all the same, and its events carry none:
 * which goroutine a thread runs is not known.
 */
#ifndef KREPLAY_CAPTURE_GOLANG_H
#define KREPLAY_CAPTURE_GOLANG_H

#include "../capture.h"
#include "maps.h"
#include "lifetime.h"
#include "targets.h"
#include "units.h"
#include "goprocs.h"
#include "heads.h"

/* The Go binaries user space inspected (and probed, when followed). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct kr_go_file);
	__type(value, struct kr_go_binary);
} go_binaries SEC(".maps");

/* By thread: newproc1's creator's context, from its entry to where the new g is seen (layout not known) */
struct kr_go_spawn {
	__u64 pid_tgid;
	__u64 context_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct kr_go_spawn);
} go_spawns SEC(".maps");

/*
 * By persistConn: the context of the request its last roundTrip sent. LRU:
 * a lost entry leaves the connection's writeLoop none, never another's.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, struct kr_go_key);
	__type(value, __u64);
} go_conns SEC(".maps");

/*
 * By serve goroutine {tgid, g}: the request of the stream whose HEADERS its
 * processHeaders is handling, for the handler goroutine it starts there.
 * LRU: a lost entry leaves that handler none, never another stream's.
 */
struct kr_go_stream {
	__u64 handler_go; /* the callerpc of newproc1 for processHeaders' `go sc.runHandler` */
	__u64 context_id; /* a handle (lifetime.h) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct kr_go_key);
	__type(value, struct kr_go_stream);
} go_streams SEC(".maps");

/* The process's entry when its goroutines are followed (uprobes act only then), else NULL. */
static __always_inline struct kr_go_process *go_followed(__u32 tgid)
{
	struct kr_go_process *p = go_marked(tgid) ? bpf_map_lookup_elem(&go_processes, &tgid) : NULL;

	return p && p->state == KR_GO_FOLLOWED ? p : NULL;
}

/* The goroutine the current thread runs: the g its TLS holds (g0 in the scheduler). */
static __always_inline __u64 go_current_g(struct kr_go_process *p)
{
	__u64 g = 0;
#if GO_SUPPORTED
	struct task_struct *task = bpf_get_current_task_btf();

	if (bpf_probe_read_user(&g, sizeof(g), (const void *)(GO_THREAD_POINTER(task) + p->tls_offset)))
		return 0;
#endif
	return g;
}

/*
 * At a syscall's enter (and where the kernel acts for the current thread:
 * a fork, a block request): a thread of a Go process takes its current
 * goroutine's context; its entry is returned (NULL: none refreshed). One
 * load for every other thread. `wanted`: as context_watched_by's.
 */
static __always_inline struct kr_thread *go_refresh_wanted(__u64 pid_tgid, bool wanted)
{
	__u32 tgid = pid_tgid >> 32;
	struct kr_go_process *p;
	struct kr_thread *t;

	if (!go_marked(tgid))
		return NULL;
	p = bpf_map_lookup_elem(&go_processes, &tgid);
	if (!p || !context_watched_by(pid_tgid, wanted))
		return NULL;
	t = thread_entry();
	if (t)
		go_switch(t, pid_tgid, p, p->state == KR_GO_FOLLOWED ? go_current_g(p) : 0);
	return t;
}

static __always_inline void go_refresh(__u64 pid_tgid)
{
	if (go_marked(pid_tgid >> 32))
		go_refresh_wanted(pid_tgid, filter_transactions && current_wanted(pid_tgid >> 32));
}

/*
 * exec: the process runs a new program. A Go binary user space inspected
 * before (a restarted server) is marked now, before its first instruction;
 * any other waits for user space's next scan. The context a plain thread
 * carries into the new program is kept for its goroutines; a unit's thread
 * carries none (tasks.h; whichever of the two programs runs first, this
 * one keeps nothing of a unit's).
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(go_process_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = task->tgid;
	struct kr_thread *t = bpf_task_storage_get(&threads, task, NULL, 0);
	struct inode *inode = bprm->file->f_inode;
	struct kr_go_file file = {.dev = inode->i_sb->s_dev, .ino = inode->i_ino};
	struct kr_go_binary *binary = bpf_map_lookup_elem(&go_binaries, &file);
	struct kr_go_process process = {.state = KR_GO_UNFOLLOWED};

	if (t && !t->unit_kind && t->context_id) {
		process.inherited = thread_handle(t);
		bpf_map_update_elem(&exec_contexts, &tgid, &process.inherited, BPF_ANY);
	} else {
		bpf_map_delete_elem(&exec_contexts, &tgid);
	}
	if (!binary) {
		bpf_map_delete_elem(&go_processes, &tgid);
		go_unmark(tgid);
		return 0;
	}
	process.tls_offset = binary->tls_offset;
	process.h2_handler_go = binary->h2_handler_go;
	process.tls_conn_itab = binary->tls_conn_itab;
	process.m_curg = binary->m_curg;
	process.g_gopc = binary->g_gopc;
	/* a Go program before this one left its goroutines under this tgid: user space drops them first */
	if (!go_marked(tgid))
		process.state = binary->state;
	bpf_map_update_elem(&go_processes, &tgid, &process, BPF_ANY);
	go_mark(tgid);
	return 0;
}

#if GO_SUPPORTED
/*
 * The context a goroutine that `creator` starts from `callerpc` takes, when
 * it would take `inherited` (its creator's): a stream's handler, started by
 * processHeaders' `go` statement, takes the stream's request (or none),
 * whatever the serve goroutine carries; the serve goroutine's other
 * goroutines (frame writers, ...) are not the stream's.
 */
static __always_inline __u64 go_stream_handler(__u32 tgid, __u64 creator, __u64 callerpc, __u64 inherited)
{
	struct kr_go_key key = {.tgid = tgid, .ptr = creator};
	struct kr_go_stream *stream = bpf_map_lookup_elem(&go_streams, &key);
	__u64 context_id;

	if (!stream || stream->handler_go != callerpc)
		return inherited;
	context_id = stream->context_id;
	bpf_map_delete_elem(&go_streams, &key);
	/* the stream's own request: a hand-off does not replace it */
	return context_id ? context_id | KR_OWNED : 0;
}

/* The context a goroutine `creator` starts from `callerpc` takes: a request's lease passes on; the creator's
 * own request is not the new goroutine's own. */
static __always_inline __u64 go_spawn_context(struct kr_go_process *p, __u32 tgid, __u64 creator,
					      __u64 callerpc)
{
	__u64 context_id = unit_context(tgid, KR_UNIT_GOROUTINE, creator) & ~KR_OWNED;

	return p->h2_handler_go ? go_stream_handler(tgid, creator, callerpc, context_id) : context_id;
}

/*
 * runtime.newproc1(fn, callergp, callerpc) *g, entered on the system stack: the creator is callergp. Probed
 * only where the runtime's layout is not known (kr_go_process.m_curg): go_spawned reads the same from the
 * runtime.
 */
SEC("uprobe")
int go_newproc1(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct kr_go_spawn spawn = {.pid_tgid = pid_tgid};
	struct kr_go_process *p = go_followed(pid_tgid >> 32);

	if (!p)
		return 0;
	spawn.context_id = go_spawn_context(p, pid_tgid >> 32, GO_ARG2(ctx), GO_ARG3(ctx));
	bpf_map_update_elem(&go_spawns, &tid, &spawn, BPF_ANY);
	return 0;
}

/*
 * The context of the goroutine newproc1 is making (`newg`), read from the runtime where newproc1 runs: on the
 * system stack, so R14 is the M's g0, and the M's curg the goroutine whose `go` statement (newproc, whose
 * systemstack keeps curg) called it, as newproc1 itself reads it for pprof labels; newg.gopc is already that
 * statement's pc. 0 when a read fails.
 */
static __always_inline __u64 go_creator_context(struct pt_regs *ctx, struct kr_go_process *p, __u32 tgid,
						__u64 newg)
{
	__u64 m = 0, creator = 0, callerpc = 0;

	if (bpf_probe_read_user(&m, sizeof(m), (const void *)(GO_G(ctx) + GO_G_M)) || !m ||
	    bpf_probe_read_user(&creator, sizeof(creator), (const void *)(m + p->m_curg)) || !creator ||
	    bpf_probe_read_user(&callerpc, sizeof(callerpc), (const void *)(newg + p->g_gopc)))
		return 0;
	return go_spawn_context(p, tgid, creator, callerpc);
}

/* The new g takes its creator's context, or none, whatever an earlier goroutine on the same g had. */
static __always_inline void go_spawned(struct pt_regs *ctx, __u64 newg)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid, tgid = pid_tgid >> 32;
	struct kr_go_process *p = go_followed(tgid);
	struct kr_go_spawn *spawn;
	__u64 context_id = 0;

	if (p && p->m_curg) {
		context_id = go_creator_context(ctx, p, tgid, newg);
	} else if ((spawn = bpf_map_lookup_elem(&go_spawns, &tid))) {
		if (spawn->pid_tgid == pid_tgid)
			context_id = spawn->context_id;
		bpf_map_delete_elem(&go_spawns, &tid);
	}
	unit_set_context(tgid, KR_UNIT_GOROUTINE, newg, context_id);
}

/* Go's g statuses (runtime2.go, unchanged since Go 1.4) */
#define GO_G_RUNNABLE 1
#define GO_G_DEAD 6

/*
 * newproc1's one `casgstatus(newg, _Gdead, _Grunnable)`, a direct CALL (the kernel emulates it; a RET is
 * single-stepped: a #DB trap, tens of µs on a virtual machine, bench/RESULTS.md, issue 46), every
 * goroutine newproc1 makes passes before it can run: casgstatus(gp, oldval, newval) in AX, BX, CX.
 * User space probes it only where the instructions before the CALL set BX and CX to these constants;
 * the registers are checked all the same.
 */
SEC("uprobe")
int go_newproc1_runnable(struct pt_regs *ctx)
{
	if (GO_ARG2(ctx) == GO_G_DEAD && GO_ARG3(ctx) == GO_G_RUNNABLE)
		go_spawned(ctx, GO_ARG1(ctx));
	return 0;
}

/* newproc1's RET sites, the new g in AX: where its casgstatus call is not found. */
SEC("uprobe")
int go_newproc1_ret(struct pt_regs *ctx)
{
	go_spawned(ctx, GO_RESULT(ctx));
	return 0;
}

/*
 * A stream's request, from the fields of its HEADERS frame (Go decoded
 * them: HPACK, CONTINUATION frames): a context record as a runtime hook's
 * (KR_CONTEXT_RUNTIME), whose data is an HTTP/1.x head user space parses as
 * any other: a request line, then a line per slot, each the first field of
 * its name or blanks, then the blank line. A value longer than a slot holds
 * is invalid for both names (a traceparent is 55 bytes, an x-request-id at
 * most 128): its slot says so with "!". A header list Go truncated, or one
 * with more fields than are looked at, gets no blank line: an incomplete
 * head, none (counted by user space).
 *
 * Go's layouts (amd64, unchanged since HTTP/2 came into net/http):
 * http2MetaHeadersFrame {*http2HeadersFrame; Fields []hpack.HeaderField;
 * Truncated bool}, hpack.HeaderField {Name, Value string; Sensitive bool}.
 */
#define GO_H2_FIELDS 8
#define GO_H2_TRUNCATED 32
#define GO_H2_FIELD_SIZE 40
#define GO_H2_MAX_FIELDS 64
#define GO_H2_REQUEST_LINE "GET / HTTP/1.1\r\n"
#define GO_H2_LINE 16
#define GO_H2_SLOT 160
/* a slot: name, value, CRLF */
#define GO_H2_MAX_VALUE (GO_H2_SLOT - 14 - 2)
#define GO_H2_HEAD_LEN (GO_H2_LINE + 2 * GO_H2_SLOT + 2)

struct go_string {
	__u64 ptr;
	__u64 len;
};

struct go_header_field {
	struct go_string name;
	struct go_string value;
};

/* Fills a slot with the field's name and value; false when the value could not be read. */
static __always_inline bool go_h2_slot(char *slot, const char *name, __u32 name_len, struct go_string *value)
{
	__u64 n = value->len;

	__builtin_memcpy(slot, name, name_len);
	if (n > GO_H2_MAX_VALUE) {
		slot[name_len] = '!';
		return true;
	}
	barrier_var(n);
	if (n > GO_H2_MAX_VALUE)
		n = GO_H2_MAX_VALUE;
	return !n || !bpf_probe_read_user(slot + name_len, n, (const void *)value->ptr);
}

/* Opens the context record of the stream whose HEADERS frame `frame` is; 0 when the ring was full. */
static __always_inline __u64 go_h2_request(__u64 pid_tgid, __u64 frame)
{
	struct kr_context *rec = context_reserve(KR_CONTEXT_RUNTIME, 0, pid_tgid);
	char *traceparent, *request_id;
	struct go_string fields = {};
	bool complete = false, seen_traceparent = false, seen_request_id = false;
	__u8 truncated = 1;

	if (!rec)
		return 0;
	__builtin_memcpy(rec->data, GO_H2_REQUEST_LINE, GO_H2_LINE);
	__builtin_memset(rec->data + GO_H2_LINE, ' ', 2 * GO_H2_SLOT);
	traceparent = rec->data + GO_H2_LINE;
	request_id = traceparent + GO_H2_SLOT;
	traceparent[GO_H2_SLOT - 2] = '\r';
	traceparent[GO_H2_SLOT - 1] = '\n';
	request_id[GO_H2_SLOT - 2] = '\r';
	request_id[GO_H2_SLOT - 1] = '\n';
	if (bpf_probe_read_user(&fields, sizeof(fields), (const void *)(frame + GO_H2_FIELDS)) ||
	    bpf_probe_read_user(&truncated, sizeof(truncated), (const void *)(frame + GO_H2_TRUNCATED)) ||
	    truncated || fields.len > GO_H2_MAX_FIELDS)
		goto out;
	for (int i = 0; i < GO_H2_MAX_FIELDS; i++) {
		struct go_header_field field;
		__u64 name[2] = {};

		if (i >= fields.len) {
			complete = true;
			break;
		}
		if (bpf_probe_read_user(&field, sizeof(field),
					(const void *)(fields.ptr + i * GO_H2_FIELD_SIZE)))
			break;
		/* names are lower case in HTTP/2 (Go refuses others) */
		if (field.name.len == 11 && !seen_traceparent) {
			if (bpf_probe_read_user(name, 11, (const void *)field.name.ptr))
				break;
			if (name[0] == W8('t', 'r', 'a', 'c', 'e', 'p', 'a', 'r') &&
			    name[1] == W4('e', 'n', 't', 0)) {
				seen_traceparent = true;
				if (!go_h2_slot(traceparent, "traceparent: ", 13, &field.value))
					break;
			}
		} else if (field.name.len == 12 && !seen_request_id) {
			if (bpf_probe_read_user(name, 12, (const void *)field.name.ptr))
				break;
			if (name[0] == W8('x', '-', 'r', 'e', 'q', 'u', 'e', 's') &&
			    name[1] == W4('t', '-', 'i', 'd')) {
				seen_request_id = true;
				if (!go_h2_slot(request_id, "x-request-id: ", 14, &field.value))
					break;
			}
		}
	}
out:
	if (!complete)
		return context_submit(rec, GO_H2_HEAD_LEN - 2);
	rec->data[GO_H2_HEAD_LEN - 2] = '\r';
	rec->data[GO_H2_HEAD_LEN - 1] = '\n';
	return context_submit(rec, GO_H2_HEAD_LEN);
}

/*
 * (*http2serverConn).processHeaders(f), entered on the connection's serve
 * goroutine (receiver in AX, f in BX): the handler goroutine its `go`
 * statement starts takes the stream's request. The serve goroutine itself
 * works for no one request: it carries none.
 */
SEC("uprobe")
int go_h2_headers(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_go_key key = {.tgid = pid_tgid >> 32, .ptr = GO_G(ctx)};
	struct kr_go_process *p = go_followed(key.tgid);
	struct kr_go_stream stream;

	if (!p || !p->h2_handler_go)
		return 0;
	unit_set_context(key.tgid, KR_UNIT_GOROUTINE, key.ptr, 0);
	/* the uprobe's ip is processHeaders' entry where it is mapped */
	stream.handler_go = PT_REGS_IP(ctx) + p->h2_handler_go;
	/* a request's; net/http tells no stream's end here: it lives until live_requests drops it */
	stream.context_id = request_opened(go_h2_request(pid_tgid, GO_ARG2(ctx)));
	if (bpf_map_update_elem(&go_streams, &key, &stream, BPF_ANY))
		bpf_map_delete_elem(&go_streams, &key);
	return 0;
}

/*
 * net/http's client pool: a persistConn's writeLoop and readLoop goroutines
 * were made by whichever request dialed it and serve every request sent on
 * it after. (*persistConn).roundTrip, entered on the requesting goroutine
 * (the persistConn in AX), keeps the request's context for the connection.
 */
SEC("uprobe")
int go_round_trip(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_go_key key = {.tgid = pid_tgid >> 32, .ptr = GO_ARG1(ctx)};
	__u64 context_id;

	if (!go_followed(key.tgid))
		return 0;
	context_id = unit_context(key.tgid, KR_UNIT_GOROUTINE, GO_G(ctx)) & ~KR_OWNED;
	bpf_map_update_elem(&go_conns, &key, &context_id, BPF_ANY);
	return 0;
}

/*
 * (*persistConn).waitForContinue, called by the writeLoop right before it
 * writes each request: the writeLoop now works for it (its send gives the
 * connection the request's context).
 */
SEC("uprobe")
int go_conn_write(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_go_key key = {.tgid = pid_tgid >> 32, .ptr = GO_ARG1(ctx)};
	__u64 *context_id;

	if (!go_followed(key.tgid))
		return 0;
	context_id = bpf_map_lookup_elem(&go_conns, &key);
	unit_set_context(key.tgid, KR_UNIT_GOROUTINE, GO_G(ctx), context_id ? *context_id : 0);
	return 0;
}

/*
 * (*persistConn).readLoop's start: it reads every response of the
 * connection, whose reads carry the connection's context; it carries none
 * of its own, not the dialer's.
 */
SEC("uprobe")
int go_read_loop(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	unit_set_context(pid_tgid >> 32, KR_UNIT_GOROUTINE, GO_G(ctx), 0);
	return 0;
}

/*
 * Channel hand-offs: a value a goroutine sends on a channel (`ch <- v`:
 * runtime.chansend, blocking) and another receives (`<-ch`, `v, ok := <-ch`,
 * `range ch`: chanrecv1's and chanrecv2's CALL runtime.chanrecv and RET sites, or chanrecv's entry and RET
 * sites where those are not found) gives the receiver the sender's context (a lease, which ends with the
 * sender's request), unless the receiver serves a request of its own (KR_OWNED: a head it read, its stream,
 * its marker). A value is known by its channel and its first 16 bytes (a pointer, an id, a string's data):
 * two sends in flight of the same bytes from different contexts leave their receivers none, and so does a
 * value whose send was not seen (a select's, a timer's, one sent before the agent): never the context the
 * receiver had. A select's receive is not looked at.
 */
struct kr_go_value {
	__u32 tgid;
	__u32 pad;
	__u64 chan;
	__u64 bytes[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct kr_go_value);
	__type(value, __u64); /* the sender's context handle, 0: none */
} go_sent SEC(".maps");

struct kr_go_recv {
	__u64 chan;
	__u64 elem; /* where the received value lands */
};

/* By goroutine {tgid, g}: a chanrecv from its entry to its RET. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct kr_go_key);
	__type(value, struct kr_go_recv);
} go_recvs SEC(".maps");

/* hchan {qcount, dataqsiz uint; buf unsafe.Pointer; elemsize uint16; ...}: unchanged since Go 1.4 */
#define GO_HCHAN_ELEMSIZE 24

/* The key of the value at `elem` on channel `chan`; false when it could not be read. */
static __always_inline bool go_value(struct kr_go_value *v, __u32 tgid, __u64 chan, __u64 elem)
{
	__u16 size = 0;
	__u64 n;

	__builtin_memset(v, 0, sizeof(*v));
	v->tgid = tgid;
	v->chan = chan;
	if (!chan || bpf_probe_read_user(&size, sizeof(size), (const void *)(chan + GO_HCHAN_ELEMSIZE)))
		return false;
	n = size;
	barrier_var(n);
	if (n > sizeof(v->bytes))
		n = sizeof(v->bytes);
	return !n || !bpf_probe_read_user(v->bytes, n, (const void *)elem);
}

/* runtime.chansend(c *hchan, ep unsafe.Pointer, block bool, callerpc uintptr), on the sending goroutine. */
SEC("uprobe")
int go_chansend(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct kr_go_value v;
	__u64 handle, *found;

	/* a non-blocking send (a timer's, a select's default) may run on any goroutine: not a hand-off */
	if (!go_followed(tgid) || !(GO_ARG3(ctx) & 0xff) || !attribution_enabled ||
	    !context_watched(pid_tgid) || !go_value(&v, tgid, GO_ARG1(ctx), GO_ARG2(ctx)))
		return 0;
	handle = unit_context(tgid, KR_UNIT_GOROUTINE, GO_G(ctx)) & ~KR_OWNED;
	if (!bpf_map_update_elem(&go_sent, &v, &handle, BPF_NOEXIST))
		return 0;
	/* the same bytes in flight already: from another context, which receiver gets which is not known */
	found = bpf_map_lookup_elem(&go_sent, &v);
	if (found && *found != handle)
		*found = 0;
	return 0;
}

/*
 * runtime.chanrecv(c *hchan, ep unsafe.Pointer, block bool), on the receiver: where the value lands. At the
 * CALL in chanrecv1 and chanrecv2 (the same arguments): a select's or non-blocking receive (net/http's
 * context.WithCancel makes one a request) runs no probe.
 */
SEC("uprobe")
int go_chanrecv(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_go_key key = {.tgid = pid_tgid >> 32, .ptr = GO_G(ctx)};
	struct kr_go_recv r = {.chan = GO_ARG1(ctx), .elem = GO_ARG2(ctx)};

	if (!go_followed(key.tgid) || !attribution_enabled || !context_watched(pid_tgid))
		return 0;
	bpf_map_update_elem(&go_recvs, &key, &r, BPF_ANY);
	return 0;
}

/* The receive go_chanrecv saw ended (`received`: a value, not a closed channel's zero): the receiver takes
 * the value's sender's context. */
static __always_inline int go_received(struct pt_regs *ctx, bool received)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_go_key key = {.tgid = pid_tgid >> 32, .ptr = GO_G(ctx)};
	struct kr_go_recv *found = bpf_map_lookup_elem(&go_recvs, &key);
	struct kr_go_recv r = {};
	struct kr_go_value v;
	__u64 handle = 0, *sent;

	if (!go_followed(key.tgid))
		return 0;
	if (found) {
		r = *found;
		bpf_map_delete_elem(&go_recvs, &key);
	}
	/* nothing received (a closed channel, an empty one not waited for), or the value dropped */
	if (found && (!received || !r.elem))
		return 0;
	if (found && go_value(&v, key.tgid, r.chan, r.elem) && (sent = bpf_map_lookup_elem(&go_sent, &v))) {
		handle = *sent;
		bpf_map_delete_elem(&go_sent, &v);
	}
	if (!(unit_context(key.tgid, KR_UNIT_GOROUTINE, key.ptr) & KR_OWNED))
		unit_set_context(key.tgid, KR_UNIT_GOROUTINE, key.ptr, handle);
	return 0;
}

/* chanrecv's RET sites, received in BX: where chanrecv1 and chanrecv2 are not found instead. */
SEC("uprobe")
int go_chanrecv_ret(struct pt_regs *ctx)
{
	return go_received(ctx, GO_ARG2(ctx) & 0xff);
}

/* hchan's closed uint32, after elemsize uint16 */
#define GO_HCHAN_CLOSED 28

/*
 * The blocking receives' RET sites (chanrecv1 and chanrecv2 call chanrecv with block true): chanrecv's
 * own RETs stop every select's and non-blocking receive too (net/http's context.WithCancel makes one a
 * request), and the kernel single-steps a RET, a #DB trap a virtual machine turns into an exit to its
 * hypervisor (bench/RESULTS.md, issue 46). `<-ch` (chanrecv1) returns nothing: a closed channel's
 * receive may be a value or its zero, so it hands nothing off; `v, ok := <-ch` (chanrecv2) returns ok
 * in AX.
 */
SEC("uprobe")
int go_chanrecv1_ret(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_go_key key = {.tgid = pid_tgid >> 32, .ptr = GO_G(ctx)};
	struct kr_go_recv *found = bpf_map_lookup_elem(&go_recvs, &key);
	__u32 closed = 1;

	if (found)
		bpf_probe_read_user(&closed, sizeof(closed), (const void *)(found->chan + GO_HCHAN_CLOSED));
	return go_received(ctx, !closed);
}

SEC("uprobe")
int go_chanrecv2_ret(struct pt_regs *ctx)
{
	return go_received(ctx, GO_RESULT(ctx) & 0xff);
}

/*
 * crypto/tls: a server's (*tls.Conn).Read(b) on a TCP socket, from its
 * entry to its RET sites (never a uretprobe on Go), by goroutine {tgid, g}:
 * where its plaintext lands. Not LRU: a read the table has no room for is
 * known at its entry, and its goroutine carries none from there (counted),
 * never the request it served before. An entry is dropped at the RET, by the
 * goroutine's next read, or with its process (native/probes/go_probes.cc).
 */
struct kr_go_tls_read {
	__u64 buf;
	__u64 conn; /* the *tls.Conn */
	__u64 tcp_conn; /* the *net.TCPConn under it */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct kr_go_key);
	__type(value, struct kr_go_tls_read);
} go_tls_reads SEC(".maps");

/*
 * Go's layouts (amd64, unchanged since Go 1.4): tls.Conn {conn net.Conn;
 * isClient bool; ...}, net.TCPConn {conn{fd *netFD}}, netFD {pfd poll.FD;
 * ...}, poll.FD {fdmu fdMutex (16 bytes); Sysfd int; ...}.
 */
struct go_tls_conn {
	__u64 itab; /* net.Conn's */
	__u64 data;
	__u8 is_client;
};

#define GO_NETFD_SYSFD 16

/*
 * (*tls.Conn).Read(b []byte), entered on the reading goroutine (receiver in
 * AX, b's pointer in BX): a server's connection whose net.Conn is a
 * *net.TCPConn (its itab: anything else, a wrapper, has no socket known
 * here) has its read looked at when it returns. Any other read drops what
 * an earlier read of the goroutine left (one that never returned).
 */
SEC("uprobe")
int go_tls_read(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_go_key key = {.tgid = pid_tgid >> 32, .ptr = GO_G(ctx)};
	struct kr_go_process *p = go_followed(key.tgid);
	struct kr_go_tls_read r = {.buf = GO_ARG2(ctx), .conn = GO_ARG1(ctx)};
	struct go_tls_conn conn;

	if (!p || !p->tls_conn_itab || !attribution_enabled || !context_watched(pid_tgid))
		return 0;
	if (bpf_probe_read_user(&conn, sizeof(conn), (const void *)r.conn) || conn.is_client || !conn.data ||
	    conn.itab != PT_REGS_IP(ctx) + p->tls_conn_itab) {
		bpf_map_delete_elem(&go_tls_reads, &key);
		return 0;
	}
	r.tcp_conn = conn.data;
	if (bpf_map_update_elem(&go_tls_reads, &key, &r, BPF_ANY)) {
		count_event(KR_COUNTER_REQUEST_TABLE_FULL);
		unit_set_context(key.tgid, KR_UNIT_GOROUTINE, key.ptr, 0);
	}
	return 0;
}

/*
 * Read's RET sites, n in AX: its plaintext goes through the head sniffing
 * of a server's socket read (heads.h), on the connection's socket (the
 * netFD's descriptor) as a TLS connection, for the goroutine that read it
 * (a head gives it the request; Go's 1-byte peek of the next request, on
 * a goroutine of its own, is joined with the serving goroutine's next
 * read by the socket).
 */
SEC("uprobe")
int go_tls_read_ret(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_go_key key = {.tgid = pid_tgid >> 32, .ptr = GO_G(ctx)};
	struct kr_go_tls_read *found = bpf_map_lookup_elem(&go_tls_reads, &key);
	__u64 got = GO_RESULT(ctx), w = 0, netfd = 0, stamp = 0;
	struct kr_go_process *p;
	struct kr_go_tls_read r;
	struct sock *sk = NULL;
	struct kr_thread *t;
	__s64 fd = -1;

	if (!found)
		return 0;
	r = *found;
	bpf_map_delete_elem(&go_tls_reads, &key);
	p = go_followed(key.tgid);
	if (!p || !bpf_rdonly_cast || (__s64)got <= 0 ||
	    bpf_probe_read_user(&w, got < sizeof(w) ? got & 7 : sizeof(w), (const void *)r.buf))
		return 0;
	/* only upper case or a space can begin or continue a token: most plaintext stops here */
	if ((__u8)w != ' ' && ((__u8)w < 'A' || (__u8)w > 'Z'))
		return 0;
	if (!bpf_probe_read_user(&netfd, sizeof(netfd), (const void *)r.tcp_conn) && netfd &&
	    !bpf_probe_read_user(&fd, sizeof(fd), (const void *)(netfd + GO_NETFD_SYSFD)) && fd >= 0 &&
	    fd <= 0x7fffffff)
		sk = file_sock(current_file(fd), &stamp);
	t = sk ? thread_entry() : NULL;
	if (!t) {
		/* a head on a connection whose socket went (closed meanwhile): its goroutine serves none */
		if (got >= MIN_TOKEN_LEN && is_http_request(w))
			unit_set_context(key.tgid, KR_UNIT_GOROUTINE, key.ptr, 0);
		return 0;
	}
	/* the thread runs the reading goroutine now, whatever it ran at its last syscall */
	go_switch(t, pid_tgid, p, key.ptr);
	head_bytes(pid_tgid, r.conn, (__u64)sk, stamp, KR_CONN_TLS | KR_CONN_SERVER, (const void *)r.buf, got,
		   w);
	return 0;
}
#endif

#endif /* KREPLAY_CAPTURE_GOLANG_H */
