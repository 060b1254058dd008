/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every concern of capture.bpf.c shares: the tunables user space sets
 * before load, the maps, the per-thread state, and the helpers that put
 * records into the ring and apply --include/--exclude.
 */
#ifndef KREPLAY_CAPTURE_MAPS_H
#define KREPLAY_CAPTURE_MAPS_H

#include "../capture.h"

/* Set by user space before load; the verifier prunes what they disable. */
const volatile __u32 self_tgid = 0;
/*
 * --include/--exclude: which filter maps hold entries (a map not in use is
 * never looked up), whether any include is in force (then a task must match
 * one), and whether excluded tasks lose their transaction events too.
 */
const volatile bool filter_by_pid = false;
const volatile bool filter_by_cgroup = false;
const volatile bool filter_by_comm = false;
const volatile bool filter_includes = false;
const volatile bool filter_transactions = false;
/* --sample-background 1/N: keep one in N writes made outside any context; 0 or 1 keeps all */
const volatile __u32 sample_background = 0;
const volatile __u64 min_duration_ns = 0;
const volatile __u64 wakeup_data_bytes = 1 << 20; /* > 0 */
const volatile bool attribution_enabled = true;
const volatile bool issue_creates_request = false;
const volatile bool targets_enabled = true;
/* --capture-reads: reads of threads without a context too (else only those of threads with one) */
const volatile bool capture_reads = false;
/*
 * CLOCK_MONOTONIC when the programs were loaded, as a task's start_time counts it: a thread started
 * before it may be serving requests whose heads it read before the capture (heads.h).
 */
const volatile __u64 capture_started_ns = 0;

/* Last context id handed out; ids start at 1 so 0 can mean "none". */
__u64 last_context_id = 0;
/* Last target id handed out, likewise. */
__u64 last_target_id = 0;

/*
 * One bit per thread id (PID_MAX_LIMIT is 2^22): set while the thread's
 * entry carries a context. The read programs test it with one load, no
 * helper call, so a read by a thread without context costs next to nothing.
 */
#define KR_TID_BITS (1 << 22)
__u64 context_threads[KR_TID_BITS / 64] = {};

/* Linux 6.2+: lets the hot path load file and socket fields directly instead of a helper call each. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

#define KR_EEXIST 17

/* kr_thread.opened of a head that opened no context, the id no context gets (they count up from 1) */
#define KR_OPENED_NO_RECORD (~0ULL)

/* A thread's state: its context, the call it is in, the last target it used. */
struct kr_thread {
	__u64 start_ns;
	__u64 count;
	__u64 context_id;
	__s32 fd;
	__u32 syscall; /* enum kr_syscall_code and flags of the call in flight */
	__u64 target_id; /* of the call in flight */
	/* the sock of the call in flight (its sends and reads time responses), 0 for the rest */
	__u64 sock;
	__u64 sock_stamp; /* what tells that sock's connection (units.h) */
	/* the runtime unit this thread runs (units.h), 0: none; its kind stays once a runtime's hooks ran */
	__u64 unit;
	/* where a hook keeps the unit the thread runs (KR_UNIT_WATCH), read at each call; 0: none */
	__u64 unit_slot;
	/* where its WATCH or KR_UNIT_MAILBOX put the thread's mailbox (struct kr_mailbox), 0: none */
	__u64 mailbox;
	__u32 unit_kind; /* enum kr_unit_kind, 0: a plain thread */
	/* the write in flight begins with the HTTP/2 preface: a client's multiplexed connection */
	__u32 preface;
	/*
	 * context_id is a request's, held while the request lives (lifetime.h): the kr_counter its end
	 * counts under (the kind of holder); 0: a context that lasts until replaced, or none
	 */
	__u32 lease;
	/* context_id is the thread's own (a head it read, a marker it wrote): no ADOPT replaces it */
	__u32 owned;
	/*
	 * with a lease: the request whose life governs context_id (a call out's, made under it), or
	 * context_id itself for a call out's own (heads.h open_context); 0: context_id's own request
	 */
	__u64 lease_id;
	/* a call out's own context: the one the thread carries again when the call ends (a marker's, 0) */
	__u64 outer;
	/*
	 * the context the write in flight opened (a head), 0: none; it starts a request on its
	 * connection; KR_OPENED_NO_RECORD: a response head that needs no record (heads.h)
	 */
	__u64 opened;
	/*
	 * sendmmsg/recvmmsg: the user's message array, whose lengths the exit adds up;
	 * connect: the user's address, which names the peer of a connect that failed
	 */
	__u64 messages;
	/* a send's first buffer and its length, for the bytes of a request it starts */
	__u64 data;
	__u64 data_len;
	__u32 type; /* enum kr_record_type of the call in flight, 0 = none */
	__u32 addr_len; /* connect: of messages */
	/* the last target this thread used: most calls go where the previous one went */
	__u64 last_object;
	__u64 last_stamp;
	__u64 last_target_id;
	__u32 parked; /* enum kr_park (restarts.h): a call the kernel is to restart */
	/* kept current by task_rename: cheaper than asking at every call */
	char comm[KR_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KR_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/*
 * Each thread's kr_thread, kept in its task_struct: found without hashing, gone with the task (a reused
 * tid starts with none; a thread that takes its leader's tid at exec keeps its own). A lookup of an
 * entry that exists always finds it (Linux 6.2+, "bpf: Avoid unnecessary deadlock detection and
 * failures wrt task storage"); making one fails while another program on the CPU is inside a
 * task-storage call (a softirq's, a preempted uprobe's) or without memory: thread_entry counts it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct kr_thread);
} threads SEC(".maps");

/* enum kr_filter_verdict per tgid, comm and cgroup id; user space keeps the cgroup map current. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KR_MAX_FILTER_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} filter_pids SEC(".maps");

struct kr_comm_key {
	char comm[KR_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KR_MAX_FILTER_COMMS);
	__type(key, struct kr_comm_key);
	__type(value, __u8);
} filter_comms SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KR_MAX_FILTER_CGROUPS);
	__type(key, __u64);
	__type(value, __u8);
} filter_cgroups SEC(".maps");

static __always_inline void count_event(__u32 counter)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &counter);

	/* atomic: a block completion may interrupt a syscall program on this CPU */
	if (value)
		__sync_fetch_and_add(value, 1);
}

/*
 * Wakes the reader each time the unread data crosses a multiple of
 * wakeup_data_bytes: batched wake-ups, and a stalled reader is not woken
 * for every record (each wake-up is an interrupt, a VM exit on guests).
 */
static __always_inline void submit(void *record, __u64 size)
{
	__u64 unread = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 before = unread - (size + BPF_RINGBUF_HDR_SZ);
	bool crossed = unread / wakeup_data_bytes != before / wakeup_data_bytes;

	bpf_ringbuf_submit(record, crossed ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/*
 * A kr_event of `type` in the ring, its timing filled in; NULL when the
 * ring is full, counted under `dropped`.
 */
static __always_inline struct kr_event *reserve_record(__u32 type, __u32 dropped, __u64 start_ns, __u64 now,
						       __u32 size)
{
	struct kr_event *e = bpf_ringbuf_reserve(&events, size, 0);

	if (!e) {
		count_event(dropped);
		return NULL;
	}
	e->type = type;
	e->size = size;
	e->start_ns = start_ns;
	e->duration_ns = now - start_ns;
	return e;
}

static __always_inline struct kr_event *reserve_event(__u32 type, __u32 dropped, __u64 start_ns, __u64 now)
{
	return reserve_record(type, dropped, start_ns, now, sizeof(struct kr_event));
}

/*
 * What bpf_get_current_cgroup_id() computes (the cgroup v2 id), read
 * directly: a third of the helper's cost on the hot path.
 */
static __always_inline __u64 current_cgroup_id(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return task->cgroups->dfl_cgrp->kn->id;
}

/*
 * One filter map's say: 0 when it names nothing about the task, else the
 * verdict. Clears *included on an exclusion, sets it on an inclusion.
 */
static __always_inline bool filter_excludes(void *map, const void *key, bool *included)
{
	__u8 *verdict = bpf_map_lookup_elem(map, key);

	if (!verdict)
		return false;
	if (*verdict == KR_FILTER_EXCLUDE)
		return true;
	*included = true;
	return false;
}

/*
 * The last --include/--exclude verdicts on each CPU, in a slot per thread
 * id's low bits (threads that take turns on a CPU keep theirs), and what
 * each was drawn from: a tgid and a comm, all that the pid and comm filters
 * look at (their maps are filled before attach and never change). A
 * thread's next call on the CPU is judged with a few loads instead of a
 * hash lookup per selector (a comm's: a 16-byte hash). A rename changes
 * the comm, so the memo no longer matches. Not with cgroup filters: user space rewrites their map
 * while capturing, and a task moves between cgroups. `seq` is odd while the
 * memo is written: a program that ran in between (another task on this CPU)
 * cannot make a reader take a half-written one.
 */
#define KR_VERDICT_SLOTS 64

struct kr_verdict_memo {
	__u32 seq;
	__u32 tgid;
	__u64 comm[KR_COMM_LEN / 8];
	__u32 wanted;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KR_VERDICT_SLOTS);
	__type(key, __u32);
	__type(value, struct kr_verdict_memo);
} filter_verdicts SEC(".maps");

/* The filter maps' verdict on a task of `tgid` named `comm`, not memoized. */
static __always_inline bool filters_want(__u32 tgid, const __u64 *comm)
{
	bool included = !filter_includes;

	if (filter_by_pid && filter_excludes(&filter_pids, &tgid, &included))
		return false;
	if (filter_by_cgroup) {
		__u64 cgroup_id = current_cgroup_id();

		if (filter_excludes(&filter_cgroups, &cgroup_id, &included))
			return false;
	}
	/* the comm as the filter_comms key (struct kr_comm_key): its 16 bytes */
	if (filter_by_comm && filter_excludes(&filter_comms, comm, &included))
		return false;
	return included;
}

/*
 * Whether the current task passes --include/--exclude: an exclusion wins,
 * then, when includes are in force, one must match. One hash lookup per
 * kind of selector in use, the task's fields read directly (no helper),
 * unless this CPU's memo for the thread (filter_verdicts) answers for the
 * same tgid and comm.
 */
static __always_inline bool current_wanted(__u32 tgid)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct kr_verdict_memo *memo = NULL;
	__u64 comm[KR_COMM_LEN / 8];
	__u32 slot, seq = 0;
	bool wanted;

	if (tgid == self_tgid)
		return false;
	if (!filter_by_pid && !filter_by_comm && !filter_by_cgroup)
		return !filter_includes;
	__builtin_memcpy(comm, task->comm, sizeof(comm));
	if (!filter_by_cgroup) {
		slot = (__u32)bpf_get_current_pid_tgid() & (KR_VERDICT_SLOTS - 1);
		memo = bpf_map_lookup_elem(&filter_verdicts, &slot);
	}
	if (memo) {
		seq = memo->seq;
		barrier();
		wanted = memo->wanted;
		if (memo->tgid == tgid && memo->comm[0] == comm[0] && memo->comm[1] == comm[1]) {
			barrier();
			if (!(seq & 1) && memo->seq == seq)
				return wanted;
		}
	}
	wanted = filters_want(tgid, comm);
	/* not over a memo another program on this CPU is in the middle of writing */
	if (memo && !(seq & 1)) {
		memo->seq = seq + 1;
		barrier();
		memo->tgid = tgid;
		memo->comm[0] = comm[0];
		memo->comm[1] = comm[1];
		memo->wanted = wanted;
		barrier();
		memo->seq = seq + 2;
	}
	return wanted;
}

/* The current thread's entry, NULL when it has none. */
static __always_inline struct kr_thread *current_thread(void)
{
	return bpf_task_storage_get(&threads, bpf_get_current_task_btf(), NULL, 0);
}

/* The current thread's entry, made if it has none; NULL (counted) when it could not be made. */
static __always_inline struct kr_thread *thread_entry(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct kr_thread *t = bpf_task_storage_get(&threads, task, NULL, 0);
	struct kr_thread fresh = {};

	if (t)
		return t;
	bpf_get_current_comm(fresh.comm, sizeof(fresh.comm));
	t = bpf_task_storage_get(&threads, task, &fresh, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t)
		count_event(KR_COUNTER_THREAD_ENTRY_LOST);
	return t;
}

static __always_inline bool thread_has_context(__u32 tid)
{
	return context_threads[(tid / 64) & (KR_TID_BITS / 64 - 1)] & (1ULL << (tid & 63));
}

/* Marks the thread for the read programs: its entry now carries a context. */
static __always_inline void mark_context_thread(__u32 tid)
{
	if (!thread_has_context(tid))
		__sync_fetch_and_or(&context_threads[(tid / 64) & (KR_TID_BITS / 64 - 1)],
				    1ULL << (tid & 63));
}

static __always_inline void forget_thread_context(__u32 tid)
{
	if (thread_has_context(tid))
		__sync_fetch_and_and(&context_threads[(tid / 64) & (KR_TID_BITS / 64 - 1)],
				     ~(1ULL << (tid & 63)));
}

#endif /* KREPLAY_CAPTURE_MAPS_H */
