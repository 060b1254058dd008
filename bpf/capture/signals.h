/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a signal makes of a parked call (restarts.h), as the kernel's
 * handle_signal decides it: a handler turns ERESTARTNOHAND and
 * ERESTART_RESTARTBLOCK, and ERESTARTSYS without SA_RESTART, into -EINTR,
 * which the caller sees (an event now); every other case restarts the call.
 * And which signals the agent itself sent (the Node hook's SIGUSR1), so the
 * calls they interrupt are counted as its doing.
 */
#ifndef KREPLAY_CAPTURE_SIGNALS_H
#define KREPLAY_CAPTURE_SIGNALS_H

#include "../capture.h"
#include "maps.h"
#include "restarts.h"
#include "targets.h"
#include "units.h"
#include "calls.h"
#include "connect.h"

#define KR_SIG_IGN 1
#define KR_SA_RESTART 0x10000000

/* By tgid: the signals (a bit each) the agent sent the process that no thread has taken yet. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} agent_signals SEC(".maps");

/* In the sender's context: only the agent's own signals are kept. */
SEC("tp_btf/signal_generate")
int BPF_PROG(signal_generate, int sig, struct kernel_siginfo *info, struct task_struct *task, int group,
	     int result)
{
	__u64 bit = 1ULL << (sig & 63), *sent;
	__u32 tgid;

	/* result 0: TRACE_SIGNAL_DELIVERED, queued to the task */
	if (bpf_get_current_pid_tgid() >> 32 != self_tgid || result != 0)
		return 0;
	tgid = task->tgid;
	sent = bpf_map_lookup_elem(&agent_signals, &tgid);
	if (sent)
		__sync_fetch_and_or(sent, bit);
	else
		bpf_map_update_elem(&agent_signals, &tgid, &bit, BPF_NOEXIST);
	return 0;
}

/* Whether the agent sent the signal the current task now takes (which is then no longer pending). */
static __always_inline bool sent_by_agent(__u32 tgid, int sig)
{
	__u64 bit = 1ULL << (sig & 63), *sent = bpf_map_lookup_elem(&agent_signals, &tgid);

	if (!sent || !(*sent & bit))
		return false;
	__sync_fetch_and_and(sent, ~bit);
	return true;
}

/* The event of a parked call the signal's handler ends with -EINTR, its fields still the thread's. */
static __always_inline void call_interrupted(struct kr_thread *t, __u32 type, __u64 pid_tgid)
{
	__u64 now = bpf_ktime_get_boot_ns(), context_id;

	switch (type) {
	case KR_RECORD_SYS_WRITE:
		call_end(t, type, pid_tgid, -KR_EINTR, t->count, now, 0, event_context(t));
		break;
	case KR_RECORD_SYS_READ:
		context_id = read_context(t);
		if (capture_reads || context_id)
			call_end(t, type, pid_tgid, -KR_EINTR, t->count, now, 0, context_id);
		break;
	case KR_RECORD_SYS_FSYNC:
		call_end(t, type, pid_tgid, -KR_EINTR, t->count, now, 0, t->context_id);
		break;
	case KR_RECORD_SYS_CONNECT:
		/* a TCP connect's SYN went out: its state changes still time it */
		if (t->sock)
			break;
		t->target_id = targets_enabled ? call_target(t, t->fd) : 0;
		call_end(t, type, pid_tgid, -KR_EINTR, 0, now, 0, t->context_id);
		break;
	}
}

/* In the receiving thread, after the syscall's exit and before its handler runs (get_signal). */
SEC("tp_btf/signal_deliver")
int BPF_PROG(signal_deliver, int sig, struct kernel_siginfo *info, struct k_sigaction *ka)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	bool by_agent = sent_by_agent(pid_tgid >> 32, sig), eintr;
	struct kr_thread *t = current_thread();
	struct kr_parked *p;
	__u64 handler;
	__u32 type;

	if (!t || t->parked != KR_PARK_PENDING)
		return 0;
	p = bpf_map_lookup_elem(&parked_calls, &tid);
	if (!p)
		return 0;
	if (by_agent)
		p->by_agent = 1;
	handler = (__u64)ka->sa.sa_handler;
	/* SIG_DFL, SIG_IGN: no handler runs; the call restarts (or the default action ends the task) */
	if (handler <= KR_SIG_IGN)
		return 0;
	eintr = p->ret != -KR_ERESTARTNOINTR &&
		(p->ret != -KR_ERESTARTSYS || !(ka->sa.sa_flags & KR_SA_RESTART));
	if (!eintr) {
		t->parked = KR_PARK_RESTART;
		return 0;
	}
	if (p->by_agent)
		count_event(KR_COUNTER_AGENT_INTERRUPTED_CALL);
	type = p->type;
	t->parked = KR_PARK_NONE;
	bpf_map_delete_elem(&parked_calls, &tid);
	call_interrupted(t, type, pid_tgid);
	return 0;
}

/* The handler returns: the call it interrupted restarts next (when no other handler's return comes first). */
SEC("tracepoint/syscalls/sys_enter_rt_sigreturn")
int sys_enter_rt_sigreturn(struct trace_event_raw_sys_enter *ctx)
{
	struct kr_thread *t = current_thread();

	if (t && t->parked == KR_PARK_RESTART)
		t->parked = KR_PARK_PENDING;
	return 0;
}

#endif /* KREPLAY_CAPTURE_SIGNALS_H */
