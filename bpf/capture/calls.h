/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the four syscall types (sys_write, sys_read, sys_fsync, sys_connect)
 * share: whose calls are recorded, the state a thread keeps from a call's
 * enter to its exit, and the kr_event written at exit.
 */
#ifndef KREPLAY_CAPTURE_CALLS_H
#define KREPLAY_CAPTURE_CALLS_H

#include "../capture.h"
#include "maps.h"
#include "restarts.h"
#include "targets.h"
#include "units.h"
#include "heads.h"

/*
 * When each socket's last send ended, for the response time of the first
 * read after it; 0 once that read came. Kept only for threads whose reads
 * are recorded. Written in place: a server's sock has its entry from one
 * request to the next, not a node allocated and freed for each.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* the sock */
	__type(value, __u64); /* CLOCK_BOOTTIME */
} last_sends SEC(".maps");

/*
 * The thread entry of a call to record, or NULL: a task the filters want
 * (`wanted`; its entry made if new), else, unless --filter-transactions,
 * one whose thread carries a context, its code then flagged
 * KR_EVENT_CONTEXT_ONLY. `t`: the thread's entry when the caller has it.
 */
static __always_inline struct kr_thread *call_thread_of(__u64 pid_tgid, bool wanted, struct kr_thread *t,
							__u32 *code)
{
	if (wanted) {
		if (!t)
			t = thread_entry();
		if (t)
			unit_refresh(t, pid_tgid);
		return t;
	}
	if (pid_tgid >> 32 == self_tgid || !attribution_enabled || filter_transactions)
		return NULL;
	if (!t)
		t = current_thread();
	if (t)
		unit_refresh(t, pid_tgid);
	if (!t || !t->context_id)
		return NULL;
	*code |= KR_EVENT_CONTEXT_ONLY;
	return t;
}

static __always_inline struct kr_thread *call_thread(__u64 pid_tgid, __u32 *code)
{
	return call_thread_of(pid_tgid, current_wanted(pid_tgid >> 32), NULL, code);
}

/*
 * Remembers the call until its exit: the start time last, so the duration
 * leaves out this program's work. Ends in resolve_target when the call's
 * target is new (which starts the call again when it is done).
 */
static __always_inline void call_begin(void *ctx, struct kr_thread *t, __u32 type, __u32 code, __s32 fd,
				       __u64 count)
{
	bool pending = false;

	t->fd = fd;
	if (targets_enabled) {
		t->target_id = call_target_deferred(t, fd, &pending);
	} else {
		t->target_id = 0;
		t->sock = 0;
	}
	t->count = count;
	t->syscall = code;
	t->type = type;
	if (t->parked)
		call_resume(t, (__u32)bpf_get_current_pid_tgid(), type, code, fd, count, false);
	call_start(t);
	if (pending) {
		bpf_tail_call(ctx, &resolve_targets, 0);
		/* not loaded: the id stays without a record */
		t->target_id = 0;
	}
}

/*
 * The thread's call of `type` that is ending now with `ret`, or NULL when
 * none is in flight or the kernel is to restart it (then it is parked).
 */
static __always_inline struct kr_thread *call_exit(__u32 type, __s64 ret, __u64 *pid_tgid)
{
	__u32 tid;
	struct kr_thread *t;

	*pid_tgid = bpf_get_current_pid_tgid();
	tid = (__u32)*pid_tgid;
	t = current_thread();
	if (!t || t->type != type)
		return NULL;
	t->type = 0;
	if (restart_code(ret)) {
		call_park(t, tid, type, ret);
		return NULL;
	}
	return t;
}

/* enum kr_counter of the events of a record type; the ring-full counter follows each. */
static __always_inline __u32 emitted_counter(__u32 type)
{
	switch (type) {
	case KR_RECORD_SYS_READ:
		return KR_COUNTER_SYS_READ_EMITTED;
	case KR_RECORD_SYS_FSYNC:
		return KR_COUNTER_SYS_FSYNC_EMITTED;
	case KR_RECORD_SYS_CONNECT:
		return KR_COUNTER_SYS_CONNECT_EMITTED;
	default:
		return KR_COUNTER_SYS_WRITE_EMITTED;
	}
}

/* A syscall event in the ring, its timing filled in, or NULL (ring full, or shorter than --min-duration). */
static __always_inline struct kr_event *reserve_call(__u32 type, __u64 start_ns, __u64 now, __u64 response_ns)
{
	if (now - start_ns < min_duration_ns && response_ns < min_duration_ns)
		return NULL;
	return reserve_event(type, emitted_counter(type) + 1, start_ns, now);
}

static __always_inline void submit_call(struct kr_event *e, __u32 type)
{
	submit(e, sizeof(*e));
	count_event(emitted_counter(type));
}

/*
 * Fills the event of the thread's call that ended at `now` (its timing is
 * filled by reserve_event); context_id: the thread's, or for a call on a
 * socket its connection's (event_context).
 */
static __always_inline void call_fill(struct kr_event *e, struct kr_thread *t, __u64 pid_tgid, __s64 ret,
				      __u64 count, __u64 response_ns, __u64 context_id)
{
	e->cgroup_id = current_cgroup_id();
	e->context_id = context_id;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	__builtin_memcpy(e->comm, t->comm, sizeof(e->comm));
	e->call.ret = ret;
	e->call.count = count;
	e->call.fd = t->fd;
	e->call.syscall = t->syscall;
	e->call.target_id = t->target_id;
	e->call.response_ns = response_ns;
}

/* Writes the event of the thread's call that ended at `now`. */
static __always_inline void call_end(struct kr_thread *t, __u32 type, __u64 pid_tgid, __s64 ret, __u64 count,
				     __u64 now, __u64 response_ns, __u64 context_id)
{
	struct kr_event *e = reserve_call(type, t->start_ns, now, response_ns);

	if (!e)
		return;
	call_fill(e, t, pid_tgid, ret, count, response_ns, context_id);
	submit_call(e, type);
}

/*
 * The bytes a sendmmsg/recvmmsg moved: the kernel writes each message's
 * length into the caller's array, read here for the first `done` of them.
 */
static __always_inline __u64 mmsg_bytes(__u64 messages, __s64 done)
{
	struct mmsghdr *vec = (struct mmsghdr *)messages;
	__u64 total = 0;

	for (int i = 0; i < KR_MAX_MMSG; i++) {
		__u32 len;

		if (i >= done || bpf_probe_read_user(&len, sizeof(len), &vec[i].msg_len))
			break;
		total += len;
	}
	return total;
}

/*
 * Where a call's data is and how much it asks for, by how it names its
 * buffer: the first non-empty buffer (for the context sniffing of sends)
 * and the total.
 */
static __always_inline const void *call_data(struct trace_event_raw_sys_enter *ctx, __u32 how,
					     __u64 *first_len, __u64 *count)
{
	const void *data = (const void *)ctx->args[1];
	struct user_msghdr m;

	*count = ctx->args[2];
	*first_len = *count;
	switch (how) {
	case KR_IOV:
		return first_iov(data, *count, first_len, count);
	case KR_MSG:
	case KR_MMSG:
		/* an mmsghdr starts with its user_msghdr; the exit counts an mmsg's bytes */
		if (bpf_probe_read_user(&m, sizeof(m), data))
			return NULL;
		data = first_iov(m.msg_iov, m.msg_iovlen, first_len, count);
		if (how == KR_MMSG)
			*count = 0;
		return data;
	case KR_NO_BUF:
		/* sendfile(out_fd, in_fd, offset, count) */
		*count = ctx->args[3];
		return NULL;
	default:
		return data;
	}
}

#endif /* KREPLAY_CAPTURE_CALLS_H */
