// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every kernel program of kreplay: write-family syscalls, block requests
 * and the context (transaction) a thread works for. Records go into one
 * ring buffer in the layouts of capture.h.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "capture.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space before load; the verifier prunes what they disable. */
const volatile __u32 self_tgid = 0;
const volatile __u32 filter_pids[KR_MAX_FILTER_PIDS] = {};
const volatile __u32 filter_pid_count = 0;
const volatile __u64 filter_cgroup_id = 0;
const volatile char filter_comm[KR_COMM_LEN] = {};
const volatile __u64 min_duration_ns = 0;
const volatile __u64 wakeup_data_bytes = 1 << 20; /* > 0 */
const volatile bool attribution_enabled = true;
const volatile bool issue_creates_request = false;

/* Last context id handed out; ids start at 1 so 0 can mean "none". */
__u64 last_context_id = 0;

#define KR_MAX_IOVECS 64
#define KR_EEXIST 17
#define KR_REQ_OP_MASK 0xff
#define KR_REQ_OP_FLUSH 2

struct kr_thread {
	__u64 start_ns;
	__u64 count;
	__u64 context_id;
	__s32 fd;
	__u32 syscall; /* enum kr_syscall in flight, 0 = none */
	/* kept current by task_rename: cheaper than asking at every write */
	char comm[KR_COMM_LEN];
};

struct kr_request {
	__u64 start_ns; /* submit (block_io_start or insert) */
	__u64 issue_ns; /* 0 until issued to the driver */
	__u64 cgroup_id;
	__u64 context_id;
	__u32 pid;
	__u32 tid;
	__u32 bytes;
	__u32 ignored; /* submitter filtered out: complete silently */
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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 131072);
	__type(key, __u32);
	__type(value, struct kr_thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct kr_request);
} requests SEC(".maps");

struct request___old {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

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
static __always_inline struct kr_event *reserve_event(__u32 type, __u32 dropped, __u64 start_ns, __u64 now)
{
	struct kr_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count_event(dropped);
		return NULL;
	}
	e->type = type;
	e->size = sizeof(*e);
	e->start_ns = start_ns;
	e->duration_ns = now - start_ns;
	return e;
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

static __always_inline bool comm_wanted(void)
{
	char comm[KR_COMM_LEN];

	bpf_get_current_comm(comm, sizeof(comm));
	for (int i = 0; i < KR_COMM_LEN; i++) {
		if (comm[i] != filter_comm[i])
			return false;
		if (!comm[i])
			break;
	}
	return true;
}

/* Whether the current task passes the configured filters. */
static __always_inline bool current_wanted(__u32 tgid)
{
	if (tgid == self_tgid)
		return false;
	if (filter_pid_count) {
		bool listed = false;

		for (int i = 0; i < KR_MAX_FILTER_PIDS; i++) {
			if (i >= filter_pid_count)
				break;
			if (filter_pids[i] == tgid) {
				listed = true;
				break;
			}
		}
		if (!listed)
			return false;
	}
	if (filter_cgroup_id && current_cgroup_id() != filter_cgroup_id)
		return false;
	if (filter_comm[0] && !comm_wanted())
		return false;
	return true;
}

static __always_inline struct kr_thread *thread_entry(__u32 tid)
{
	struct kr_thread *t = bpf_map_lookup_elem(&threads, &tid);
	struct kr_thread fresh = {};

	if (t)
		return t;
	bpf_get_current_comm(fresh.comm, sizeof(fresh.comm));
	if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST)) {
		count_event(KR_COUNTER_THREAD_TABLE_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

#define W4(a, b, c, d) ((__u32)(a) | (__u32)(b) << 8 | (__u32)(c) << 16 | (__u32)(d) << 24)
#define W8(a, b, c, d, e, f, g, h) ((__u64)W4(a, b, c, d) | (__u64)W4(e, f, g, h) << 32)
#define LOW(w, n) ((w) & ((1ULL << ((n) * 8)) - 1))
#define LETTER(c) (1U << ((c) - 'A'))
/* first letters of "HTTP/1." and of the method tokens */
#define HTTP_FIRST_LETTERS                                                                  \
	(LETTER('C') | LETTER('D') | LETTER('G') | LETTER('H') | LETTER('O') | LETTER('P') | \
	 LETTER('T'))
/* "GET " and "PUT " are the shortest tokens */
#define MIN_TOKEN_LEN 4

static __always_inline bool is_marker(__u64 w0, __u64 w1, __u64 len)
{
	char next = w1 >> 24;

	if (w0 != W8('K', 'R', 'E', 'P', 'L', 'A', 'Y', '-') || LOW(w1, 3) != W4('C', 'T', 'X', 0))
		return false;
	return (len == 11 && !next) || next == ' ' || next == '\t' || next == '\n' || next == '\r';
}

static __always_inline bool is_http_head(__u64 w0)
{
	return LOW(w0, 4) == W4('G', 'E', 'T', ' ') || LOW(w0, 4) == W4('P', 'U', 'T', ' ') ||
	       LOW(w0, 5) == W8('P', 'O', 'S', 'T', ' ', 0, 0, 0) ||
	       LOW(w0, 5) == W8('H', 'E', 'A', 'D', ' ', 0, 0, 0) ||
	       LOW(w0, 6) == W8('P', 'A', 'T', 'C', 'H', ' ', 0, 0) ||
	       LOW(w0, 6) == W8('T', 'R', 'A', 'C', 'E', ' ', 0, 0) ||
	       LOW(w0, 7) == W8('D', 'E', 'L', 'E', 'T', 'E', ' ', 0) ||
	       LOW(w0, 7) == W8('H', 'T', 'T', 'P', '/', '1', '.', 0) ||
	       w0 == W8('O', 'P', 'T', 'I', 'O', 'N', 'S', ' ') || w0 == W8('C', 'O', 'N', 'N', 'E', 'C', 'T', ' ');
}

/*
 * Classifies a write by its first bytes: a context marker, an HTTP/1.x
 * head, or 0 for everything else. The common case costs one 16-byte read
 * and a first-letter test.
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
	if (first == 'K' - 'A')
		return is_marker(w[0], w[1], len) ? KR_CONTEXT_MARKER : 0;
	if (first > 'Z' - 'A' || !(LETTER('A' + first) & HTTP_FIRST_LETTERS))
		return 0;
	return is_http_head(w[0]) ? KR_CONTEXT_HTTP : 0;
}

/*
 * Puts the context record into the ring now, at sys_enter: every event
 * that will carry its id is reserved later, so user space always reads the
 * context first.
 */
static __always_inline void open_context(struct kr_thread *t, __u32 kind, __u64 pid_tgid, const void *data,
					 __u64 len)
{
	struct kr_context *rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
	__u64 n = len;

	if (!rec) {
		count_event(KR_COUNTER_CONTEXT_DROPPED);
		return;
	}
	rec->type = KR_RECORD_CONTEXT;
	rec->size = sizeof(*rec);
	rec->context_id = __sync_fetch_and_add(&last_context_id, 1) + 1;
	rec->parent_id = t->context_id;
	rec->at_ns = bpf_ktime_get_boot_ns();
	rec->pid = pid_tgid >> 32;
	rec->tid = (__u32)pid_tgid;
	rec->kind = kind;
	/* clamped right at the call, where the verifier still sees the bound */
	barrier_var(n);
	if (n > KR_CTX_DATA_LEN)
		n = KR_CTX_DATA_LEN;
	if (bpf_probe_read_user(rec->data, n, data))
		n = 0;
	rec->len = n;
	t->context_id = rec->context_id;
	submit(rec, sizeof(*rec));
	count_event(KR_COUNTER_CONTEXT_EMITTED);
}

static __always_inline int write_enter(struct trace_event_raw_sys_enter *ctx, __u32 syscall, bool vectored)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	const void *data = (const void *)ctx->args[1];
	__u64 count = ctx->args[2];
	__u64 data_len = count;
	struct kr_thread *t;

	if (!current_wanted(pid_tgid >> 32))
		return 0;
	t = thread_entry((__u32)pid_tgid);
	if (!t)
		return 0;
	if (vectored) {
		const struct iovec *iov = data;
		__u64 iovcnt = count;

		data = NULL;
		count = 0;
		for (int i = 0; i < KR_MAX_IOVECS; i++) {
			struct iovec v;

			if (i >= iovcnt || bpf_probe_read_user(&v, sizeof(v), &iov[i]))
				break;
			/* attribution looks at the first bytes written */
			if (!data && v.iov_len) {
				data = v.iov_base;
				data_len = v.iov_len;
			}
			count += v.iov_len;
		}
	}
	if (attribution_enabled && data) {
		__u32 kind = context_kind(data, data_len);

		if (kind)
			open_context(t, kind, pid_tgid, data, data_len);
	}
	t->fd = ctx->args[0];
	t->count = count;
	t->syscall = syscall;
	/* last, so the duration leaves out this program's own work */
	t->start_ns = bpf_ktime_get_boot_ns();
	return 0;
}

static __always_inline int write_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct kr_thread *t = bpf_map_lookup_elem(&threads, &tid);
	struct kr_event *e;
	__u64 now, syscall;

	if (!t || !t->syscall)
		return 0;
	now = bpf_ktime_get_boot_ns();
	syscall = t->syscall;
	t->syscall = 0;
	if (now - t->start_ns < min_duration_ns)
		return 0;
	e = reserve_event(KR_RECORD_SYS_WRITE, KR_COUNTER_SYS_WRITE_DROPPED, t->start_ns, now);
	if (!e)
		return 0;
	e->cgroup_id = current_cgroup_id();
	e->context_id = t->context_id;
	e->pid = pid_tgid >> 32;
	e->tid = tid;
	__builtin_memcpy(e->comm, t->comm, sizeof(e->comm));
	e->write.ret = ctx->ret;
	e->write.count = t->count;
	e->write.fd = t->fd;
	e->write.syscall = syscall;
	e->write._reserved = 0;
	submit(e, sizeof(*e));
	count_event(KR_COUNTER_SYS_WRITE_EMITTED);
	return 0;
}

#define WRITE_PROGRAMS(name, code, vectored)                                          \
	SEC("tracepoint/syscalls/sys_enter_" #name)                                   \
	int sys_enter_##name(struct trace_event_raw_sys_enter *ctx)                   \
	{                                                                             \
		return write_enter(ctx, code, vectored);                              \
	}                                                                             \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                    \
	int sys_exit_##name(struct trace_event_raw_sys_exit *ctx)                     \
	{                                                                             \
		return write_exit(ctx);                                               \
	}

WRITE_PROGRAMS(write, KR_SYS_WRITE, false)
WRITE_PROGRAMS(writev, KR_SYS_WRITEV, true)
WRITE_PROGRAMS(pwrite64, KR_SYS_PWRITE64, false)
WRITE_PROGRAMS(pwritev, KR_SYS_PWRITEV, true)
WRITE_PROGRAMS(pwritev2, KR_SYS_PWRITEV2, true)

/* Children start in the context of the thread that created them. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tid = parent->pid;
	__u32 child_tid = child->pid;
	struct kr_thread *t = bpf_map_lookup_elem(&threads, &parent_tid);
	struct kr_thread inherited = {};

	if (!t || !t->context_id)
		return 0;
	inherited.context_id = t->context_id;
	bpf_probe_read_kernel(inherited.comm, sizeof(inherited.comm), child->comm);
	if (bpf_map_update_elem(&threads, &child_tid, &inherited, BPF_ANY))
		count_event(KR_COUNTER_THREAD_TABLE_FULL);
	return 0;
}

/* exec and prctl(PR_SET_NAME) and /proc/.../comm writes all come here */
SEC("tp_btf/task_rename")
int BPF_PROG(task_rename, struct task_struct *task, const char *comm)
{
	__u32 tid = task->pid;
	struct kr_thread *t = bpf_map_lookup_elem(&threads, &tid);
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
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&threads, &tid);
	return 0;
}

static __always_inline __u32 request_op(struct request *rq)
{
	return BPF_CORE_READ(rq, cmd_flags) & KR_REQ_OP_MASK;
}

/* Starts tracking rq with the current task as its submitter. */
static __always_inline void request_start(struct request *rq, __u64 update_flags)
{
	__u64 key = (__u64)rq;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_request r = {};
	long ret;

	r.start_ns = bpf_ktime_get_boot_ns();
	r.ignored = !current_wanted(pid_tgid >> 32);
	/* only the fallback mode needs to remember requests it will not report */
	if (r.ignored && !issue_creates_request)
		return;
	r.pid = pid_tgid >> 32;
	r.tid = (__u32)pid_tgid;
	r.cgroup_id = current_cgroup_id();
	r.bytes = BPF_CORE_READ(rq, __data_len);
	bpf_get_current_comm(r.comm, sizeof(r.comm));
	if (attribution_enabled) {
		struct kr_thread *t = bpf_map_lookup_elem(&threads, &r.tid);

		if (t)
			r.context_id = t->context_id;
	}
	/* -EEXIST is a requeued request keeping its first submitter */
	ret = bpf_map_update_elem(&requests, &key, &r, update_flags);
	if (ret && ret != -KR_EEXIST)
		count_event(KR_COUNTER_REQUEST_TABLE_FULL);
}

/* Linux 6.5+: fires once per request, in the submitter's context. */
SEC("tp_btf/block_io_start")
int BPF_PROG(block_io_start, struct request *rq)
{
	request_start(rq, BPF_ANY);
	return 0;
}

/* Older kernels: a requeued request is inserted again, keep its submitter. */
SEC("tp_btf/block_rq_insert")
int BPF_PROG(block_rq_insert, struct request *rq)
{
	request_start(rq, BPF_NOEXIST);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	__u64 key = (__u64)rq;
	struct kr_request *r = bpf_map_lookup_elem(&requests, &key);

	/*
	 * Requests no submit hook saw: direct issue in the fallback mode, and
	 * the flush requests the block layer builds itself (no block_io_start).
	 */
	if (!r && (issue_creates_request || request_op(rq) == KR_REQ_OP_FLUSH)) {
		request_start(rq, BPF_NOEXIST);
		r = bpf_map_lookup_elem(&requests, &key);
	}
	if (!r)
		return 0;
	r->issue_ns = bpf_ktime_get_boot_ns();
	r->bytes = BPF_CORE_READ(rq, __data_len);
	return 0;
}

static __always_inline void request_device(struct request *rq, struct kr_block_io *block)
{
	struct gendisk *disk;

	if (bpf_core_field_exists(struct request___old, rq_disk))
		disk = BPF_CORE_READ((struct request___old *)rq, rq_disk);
	else
		disk = BPF_CORE_READ(rq, q, disk);
	block->dev_major = BPF_CORE_READ(disk, major);
	block->dev_minor = BPF_CORE_READ(disk, first_minor);
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct kr_request *found, r;
	struct kr_event *e;
	__u64 now;

	/* a partial completion: the request goes on */
	if (nr_bytes < BPF_CORE_READ(rq, __data_len))
		return 0;
	found = bpf_map_lookup_elem(&requests, &key);
	if (!found)
		return 0;
	now = bpf_ktime_get_boot_ns();
	/* copy before delete: a freed element may be reused at once */
	r = *found;
	bpf_map_delete_elem(&requests, &key);
	if (r.ignored)
		return 0;
	if (r.issue_ns)
		r.start_ns = r.issue_ns;
	if (now - r.start_ns < min_duration_ns)
		return 0;
	e = reserve_event(KR_RECORD_BLOCK_IO, KR_COUNTER_BLOCK_IO_DROPPED, r.start_ns, now);
	if (!e)
		return 0;
	e->cgroup_id = r.cgroup_id;
	e->context_id = r.context_id;
	e->pid = r.pid;
	e->tid = r.tid;
	__builtin_memcpy(e->comm, r.comm, sizeof(e->comm));
	e->block.sector = BPF_CORE_READ(rq, __sector);
	e->block.bytes = r.issue_ns ? r.bytes : nr_bytes;
	request_device(rq, &e->block);
	e->block.op = request_op(rq);
	e->block.status = error;
	e->block._pad = 0;
	submit(e, sizeof(*e));
	count_event(KR_COUNTER_BLOCK_IO_EMITTED);
	return 0;
}
