/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Block I/O: each request from submit (or issue) to completion, reported
 * with the task that submitted it.
 */
#ifndef KREPLAY_CAPTURE_BLOCK_H
#define KREPLAY_CAPTURE_BLOCK_H

#include "../capture.h"
#include "maps.h"
#include "golang.h"

#define KR_REQ_OP_MASK 0xff
#define KR_REQ_OP_FLUSH 2

struct kr_request {
	__u64 start_ns; /* submit (block_io_start or insert) */
	__u64 issue_ns; /* 0 until issued to the driver */
	__u64 cgroup_id;
	__u64 context_id;
	__u32 pid;
	__u32 tid;
	__u32 bytes;
	__u32 ignored; /* submitter filtered out: complete silently */
	__u32 flags; /* KR_EVENT_CONTEXT_ONLY or 0 */
	__u32 _pad;
	char comm[KR_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct kr_request);
} requests SEC(".maps");

struct request___old {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

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

	bool wanted = current_wanted(pid_tgid >> 32);

	go_refresh(pid_tgid);
	r.start_ns = bpf_ktime_get_boot_ns();
	r.pid = pid_tgid >> 32;
	r.tid = (__u32)pid_tgid;
	if (attribution_enabled && r.pid != self_tgid && (wanted || !filter_transactions)) {
		struct kr_thread *t = current_thread();

		if (t)
			r.context_id = t->context_id;
	}
	/* an excluded submitter's request is kept for its transaction, as its writes are */
	if (!wanted && r.context_id)
		r.flags = KR_EVENT_CONTEXT_ONLY;
	r.ignored = !wanted && !r.context_id;
	/* only the fallback mode needs to remember requests it will not report */
	if (r.ignored && !issue_creates_request)
		return;
	r.cgroup_id = current_cgroup_id();
	r.bytes = BPF_CORE_READ(rq, __data_len);
	bpf_get_current_comm(r.comm, sizeof(r.comm));
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
	e->block.flags = r.flags;
	submit(e, sizeof(*e));
	count_event(KR_COUNTER_BLOCK_IO_EMITTED);
	return 0;
}

#endif /* KREPLAY_CAPTURE_BLOCK_H */
