/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A call the kernel restarts is one call. A blocking call that a signal or
 * a ptrace stop interrupts exits with a restart code (ERESTARTSYS and its
 * kin) that user space never sees: the kernel runs the call again, or, when
 * a handler runs and the code says so, returns -EINTR (signals.h decides).
 * The exit parks the call instead of recording it; the enter that restarts
 * it takes the first entry's time, so one event covers the whole wait.
 */
#ifndef KREPLAY_CAPTURE_RESTARTS_H
#define KREPLAY_CAPTURE_RESTARTS_H

#include "../capture.h"
#include "maps.h"

#define KR_ERESTARTSYS 512
#define KR_ERESTARTNOINTR 513
#define KR_ERESTARTNOHAND 514
#define KR_ERESTART_RESTARTBLOCK 516

/* kr_thread.parked */
enum kr_park {
	KR_PARK_NONE = 0,
	/* the call exited with a restart code; no handler has run yet (parked_calls holds it) */
	KR_PARK_PENDING = 1,
	/*
	 * a handler runs first (parked_calls holds the call): its calls are its own, and its
	 * rt_sigreturn makes the call pending again, the next one the thread makes
	 */
	KR_PARK_RESTART = 2,
	/* the call in flight is a restart: its start is its first entry's */
	KR_PARK_RESUMED = 3,
};

/* What tells the restart of a parked call from the other calls its thread makes meanwhile (a handler's). */
struct kr_parked {
	__u64 start_ns; /* the first entry */
	__u64 count;
	__u64 sock; /* connect: the sock whose state changes time it */
	__s32 fd;
	__u32 syscall; /* enum kr_syscall_code and flags */
	__u32 type; /* enum kr_record_type */
	__s32 ret; /* the restart code */
	/* the agent interrupted it: its ptrace (the Python hook) or its signal (the Node hook) */
	__u32 by_agent;
	__u32 pad;
};

/* By tid; only threads whose kr_thread.parked says so have an entry, so the hot path looks up nothing. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct kr_parked);
} parked_calls SEC(".maps");

static __always_inline bool restart_code(__s64 ret)
{
	return ret == -KR_ERESTARTSYS || ret == -KR_ERESTARTNOINTR || ret == -KR_ERESTARTNOHAND ||
	       ret == -KR_ERESTART_RESTARTBLOCK;
}

/* A ptrace stop of the agent's own (py_inject.cc): the tracer is a thread of this program. */
static __always_inline bool traced_by_agent(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return task->ptrace && task->parent->tgid == self_tgid;
}

/* The thread's call exited with a restart code: kept, not recorded, until it restarts or ends. */
static __always_inline void call_park(struct kr_thread *t, __u32 tid, __u32 type, __s64 ret)
{
	struct kr_parked p = {
		.start_ns = t->start_ns,
		.count = t->count,
		.sock = t->sock,
		.fd = t->fd,
		.syscall = t->syscall,
		.type = type,
		.ret = ret,
		.by_agent = traced_by_agent(),
	};

	if (bpf_map_update_elem(&parked_calls, &tid, &p, BPF_ANY))
		return;
	t->parked = KR_PARK_PENDING;
}

/*
 * At a call's enter, before its start is taken: true when it restarts the
 * thread's parked call, whose first entry it then starts at (and whose sock
 * a connect keeps: that connect's state changes time it). Only a pending
 * call restarts (no handler runs): another call ends the wait for it, since
 * nothing else runs before the kernel's restart (one by restart_syscall,
 * which none of these calls uses, is not seen). While a handler runs, every
 * call is its own; one that never returns (a longjmp) leaves the call parked
 * for good, never merged with a later call.
 */
static __always_inline bool call_resume(struct kr_thread *t, __u32 tid, __u32 type, __u32 code, __s32 fd,
					__u64 count, bool keep_sock)
{
	struct kr_parked *p;

	if (t->parked != KR_PARK_PENDING) {
		if (t->parked == KR_PARK_RESUMED)
			t->parked = KR_PARK_NONE;
		return false;
	}
	t->parked = KR_PARK_NONE;
	p = bpf_map_lookup_elem(&parked_calls, &tid);
	if (!p)
		return false;
	if (p->type != type || (p->syscall & 0xffff) != (code & 0xffff) || p->fd != fd || p->count != count) {
		bpf_map_delete_elem(&parked_calls, &tid);
		return false;
	}
	t->start_ns = p->start_ns;
	if (keep_sock)
		t->sock = p->sock;
	t->parked = KR_PARK_RESUMED;
	count_event(KR_COUNTER_RESTARTED_CALL);
	if (p->by_agent)
		count_event(KR_COUNTER_AGENT_INTERRUPTED_CALL);
	bpf_map_delete_elem(&parked_calls, &tid);
	return true;
}

/* The start of the call in flight: its first entry's when it is a restart, else now. */
static __always_inline void call_start(struct kr_thread *t)
{
	if (t->parked != KR_PARK_RESUMED)
		t->start_ns = bpf_ktime_get_boot_ns();
}

#endif /* KREPLAY_CAPTURE_RESTARTS_H */
