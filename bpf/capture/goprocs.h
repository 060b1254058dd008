/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Go processes: which processes run Go (go_processes, and a bit per tgid
 * the syscall programs test), the context each exec'd with, the goroutine
 * switch of a thread, and telling Go code from a plain thread when it reads
 * a request head (go_detect, which heads.h calls). golang.h's uprobes and
 * go_refresh build on this; it needs none of them.
 */
#ifndef KREPLAY_CAPTURE_GOPROCS_H
#define KREPLAY_CAPTURE_GOPROCS_H

#include "../capture.h"
#include "maps.h"
#include "units.h"
#include "lifetime.h"

/* Go's register ABI (ABIInternal, Go 1.17+): arguments and results from AX, BX, ...; the current g in R14. */
#if defined(__TARGET_ARCH_x86)
#define GO_ARG1(regs) ((regs)->ax)
#define GO_ARG2(regs) ((regs)->bx)
#define GO_ARG3(regs) ((regs)->cx)
#define GO_RESULT(regs) ((regs)->ax)
#define GO_G(regs) ((regs)->r14)
#define GO_THREAD_POINTER(task) ((task)->thread.fsbase)
#define GO_SUPPORTED 1
#else
#define GO_SUPPORTED 0
#endif

/* Offsets that have not moved since Go 1.4: g.stack.lo, g.stack.hi, g.m; m.g0. */
#define GO_G_STACK_LO 0
#define GO_G_STACK_HI 8
#define GO_G_M 48
#define GO_M_G0 0

/* By tgid: the Go processes user space found (or go_detect marked). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct kr_go_process);
} go_processes SEC(".maps");

/* One bit per tgid, set while go_processes holds it: the syscall programs test it with one load. */
__u64 go_tgids[KR_TID_BITS / 64] = {};

/*
 * By tgid: the context a process had when it exec'd (under `kreplay run`
 * or a marker), which a Go process's goroutines carry when they have none
 * of their own. Only contexts set before exec count: never one a head or a
 * marker gave a thread of the running program.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} exec_contexts SEC(".maps");

static __always_inline bool go_marked(__u32 tgid)
{
	return go_tgids[(tgid / 64) & (KR_TID_BITS / 64 - 1)] & (1ULL << (tgid & 63));
}

static __always_inline void go_mark(__u32 tgid)
{
	if (!go_marked(tgid))
		__sync_fetch_and_or(&go_tgids[(tgid / 64) & (KR_TID_BITS / 64 - 1)], 1ULL << (tgid & 63));
}

static __always_inline void go_unmark(__u32 tgid)
{
	if (go_marked(tgid))
		__sync_fetch_and_and(&go_tgids[(tgid / 64) & (KR_TID_BITS / 64 - 1)], ~(1ULL << (tgid & 63)));
}

/* The thread now runs goroutine g (0: one not known) and carries its context, or its process's. */
static __always_inline void go_switch(struct kr_thread *t, __u64 pid_tgid, struct kr_go_process *p, __u64 g)
{
	unit_switch(t, pid_tgid, KR_UNIT_GOROUTINE, g);
	if (!t->context_id)
		thread_hold(t, p->inherited, KR_COUNTER_OUTLIVED_PROCESS);
}

/*
 * A plain thread read a request head: if it runs Go code, its process is Go
 * that user space has not found yet (started a moment ago). Such a thread
 * must not take the request as "the last head it read": it is marked as
 * running a goroutine not known, and so is every thread of its process
 * until user space follows it. Go code is known by its g: R14 holds it in
 * Go code, the stack pointer lies in that g's stack, and its m's g0 points
 * back to that m.
 */
static __always_inline struct kr_thread *go_detect(struct kr_thread *t, __u64 pid_tgid)
{
#if GO_SUPPORTED
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	struct kr_go_process fresh = {.state = KR_GO_UNFOLLOWED}, *p;
	__u64 g = GO_G(regs), sp = regs->sp, lo = 0, hi = 0, m = 0, g0 = 0, back = 0;
	__u32 tgid = pid_tgid >> 32;
	__u64 *inherited;

	if (!g || bpf_probe_read_user(&lo, sizeof(lo), (const void *)(g + GO_G_STACK_LO)) ||
	    bpf_probe_read_user(&hi, sizeof(hi), (const void *)(g + GO_G_STACK_HI)) || sp < lo || sp >= hi ||
	    bpf_probe_read_user(&m, sizeof(m), (const void *)(g + GO_G_M)) || !m ||
	    bpf_probe_read_user(&g0, sizeof(g0), (const void *)(m + GO_M_G0)) || !g0 ||
	    bpf_probe_read_user(&back, sizeof(back), (const void *)(g0 + GO_G_M)) || back != m)
		return t;
	inherited = bpf_map_lookup_elem(&exec_contexts, &tgid);
	fresh.inherited = inherited ? *inherited : 0;
	bpf_map_update_elem(&go_processes, &tgid, &fresh, BPF_NOEXIST);
	p = bpf_map_lookup_elem(&go_processes, &tgid);
	if (!p)
		return t;
	go_mark(tgid);
	if (!t)
		t = thread_entry();
	if (t)
		go_switch(t, pid_tgid, p, 0);
#endif
	return t;
}

#endif /* KREPLAY_CAPTURE_GOPROCS_H */
