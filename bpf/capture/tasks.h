/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Task tracking: contexts inherited by children, comm kept current, entries dropped at exit. */
#ifndef KREPLAY_CAPTURE_TASKS_H
#define KREPLAY_CAPTURE_TASKS_H

#include "../capture.h"
#include "maps.h"
#include "restarts.h"
#include "lifetime.h"
#include "units.h"
#include "golang.h"

/*
 * By tgid: the processes discovery found to be a JVM (native/capture marks
 * them), until exec or the last thread's exit. A JVM's threads inherit no
 * request: a pool thread started inside a request (ThreadPoolExecutor makes
 * its workers in execute()) runs other requests' tasks while the first one
 * lives, a hand-off the kernel cannot see; the JVM hook hands units across
 * threads itself.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} jvm_processes SEC(".maps");

/*
 * The tgid of each process that started, exec'd or exited, for the
 * discoveries that would otherwise walk /proc to find them (the runtime hooks'
 * and the TLS and Go probes': native/capture/process_events.h), drained at
 * each poll without a wake-up. A record that finds no room is counted in
 * proc_events_lost, and user space walks /proc instead.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} proc_events SEC(".maps");

__u64 proc_events_lost = 0;

static __always_inline void note_process(__u32 tgid)
{
	if (attribution_enabled && bpf_ringbuf_output(&proc_events, &tgid, sizeof(tgid), BPF_RB_NO_WAKEUP))
		__sync_fetch_and_add(&proc_events_lost, 1);
}

/*
 * Children start in the context of the thread that created them: a
 * request's only while that request lives (lifetime.h), so a helper thread
 * joined within its request is the request's, and a pool or a consumer a
 * request starts (libuv's, asyncio's executor, a worker) carries it only
 * until the request ends, then none.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 child_tid = child->pid;
	struct kr_thread *t;
	struct kr_thread inherited = {};

	if (child->pid == child->tgid)
		note_process(child->tgid);
	/*
	 * a Go child process is its forking goroutine's, a hooked thread's its slot's unit's (no call
	 * the capture sees may have come since the hook's last switch); the parent is the current task
	 */
	go_refresh(bpf_get_current_pid_tgid());
	t = current_thread();
	if (t)
		unit_refresh(t, bpf_get_current_pid_tgid());
	/* a runtime's threads run units, not the unit that ran when the thread was made */
	if (!t || !t->context_id || (t->unit_kind && parent->tgid == child->tgid))
		return 0;
	if (parent->tgid == child->tgid && bpf_map_lookup_elem(&jvm_processes, &(__u32){child->tgid})) {
		count_event(KR_COUNTER_UNINHERITED_JVM_THREAD);
		return 0;
	}
	thread_inherit(&inherited, t,
		       parent->tgid == child->tgid ? KR_COUNTER_OUTLIVED_THREAD
						   : KR_COUNTER_OUTLIVED_PROCESS);
	bpf_probe_read_kernel(inherited.comm, sizeof(inherited.comm), child->comm);
	/* the child's storage is new (copy_process starts it empty): made here or not at all */
	if (bpf_task_storage_get(&threads, child, &inherited, BPF_LOCAL_STORAGE_GET_F_CREATE))
		mark_context_thread(child_tid);
	else
		count_event(KR_COUNTER_THREAD_ENTRY_LOST);
	return 0;
}

/*
 * A new program runs none of the old one's units: it starts a plain thread
 * with the context it had (a marker's, inherited), as a child process does.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *task, pid_t old_pid)
{
	__u32 tid = task->pid;
	struct kr_thread *t = bpf_task_storage_get(&threads, task, NULL, 0);

	note_process(task->tgid);
	/* a thread that took its leader's tid (de_thread) keeps its entry: the read programs' bit follows */
	if (old_pid != tid) {
		forget_thread_context(old_pid);
		if (t && t->context_id)
			mark_context_thread(tid);
	}
	/* no longer the JVM discovery found (if it is one again, discovery finds it again) */
	bpf_map_delete_elem(&jvm_processes, &(__u32){task->tgid});
	/* the memory a mailbox was in is gone, whether or not the thread ran units */
	if (t)
		t->mailbox = 0;
	if (t && t->unit_kind) {
		t->unit_kind = 0;
		t->unit = 0;
		t->unit_slot = 0;
		thread_hold(t, 0, 0);
		forget_thread_context(tid);
	}
	return 0;
}

/* exec and prctl(PR_SET_NAME) and /proc/.../comm writes all come here */
SEC("tp_btf/task_rename")
int BPF_PROG(task_rename, struct task_struct *task, const char *comm)
{
	/* another task's, when /proc/PID/comm is written */
	struct kr_thread *t = bpf_task_storage_get(&threads, task, NULL, 0);
	char renamed[KR_COMM_LEN] = {};

	if (!t)
		return 0;
	/* the kernel truncates the same way and pads with zeros */
	bpf_probe_read_kernel_str(renamed, sizeof(renamed), comm);
	__builtin_memcpy(t->comm, renamed, sizeof(renamed));
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct task_struct *task = bpf_get_current_task_btf();
	struct kr_thread *t = bpf_task_storage_get(&threads, task, NULL, 0);

	/* the process's last thread (its live count already dropped): its tgid may be reused */
	if (!task->signal->live.counter) {
		bpf_map_delete_elem(&jvm_processes, &(__u32){pid_tgid >> 32});
		note_process(pid_tgid >> 32);
	}

	/* a call the signal that ends the thread interrupted never restarts */
	if (t && t->parked)
		bpf_map_delete_elem(&parked_calls, &tid);
	/* nothing the thread does on its way out (its files' closes) carries its context */
	bpf_task_storage_delete(&threads, task);
	forget_thread_context(tid);
	return 0;
}

#endif /* KREPLAY_CAPTURE_TASKS_H */
