/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libuv's threadpool (Node's fs, dns, crypto and zlib calls): each work
 * request is a unit (KR_UNIT_WORK, its id the request's struct uv__work).
 * The thread that submits it gives it its context (a Node event loop's is
 * the JavaScript unit it runs); a pool thread carries that context while it
 * runs the request's work function, until it starts the next one. Uprobes at
 * entry only (each trap costs a request ~1 µs): uv__work_submit and
 * uv_queue_work (which inlines it), the work functions (uv__fs_work,
 * uv__queue_work, ...). Between two requests a pool thread makes one call,
 * the eventfd write that tells the loop the last one is done: that
 * request's. A synchronous call (uv_fs_* without a callback: Node's
 * fs.*Sync) runs the same work function on the calling thread: only the
 * requests submitted to the pool switch a thread's unit.
 * User space (native/probes/uv_probes.cc) attaches them to every binary with the
 * symbols: Node, which links libuv in, or a libuv.so that kept them.
 */
#ifndef KREPLAY_CAPTURE_UVPOOL_H
#define KREPLAY_CAPTURE_UVPOOL_H

#include "../capture.h"
#include "maps.h"
#include "lifetime.h"
#include "units.h"
#include "heads.h"

/*
 * Where uv_work_t holds its struct uv__work: after UV_REQ_FIELDS (data,
 * type, reserved[6]: 64 bytes), loop, work_cb and after_work_cb. libuv 1.x's
 * public ABI on 64-bit targets.
 */
#define KR_UV_WORK_REQ_OFFSET 0x58

/*
 * The requests submitted to the pool and not started yet. LRU: a request
 * the table lost runs in none.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct kr_unit_key);
	__type(value, __u8);
} uv_queued SEC(".maps");

/* A work request was queued: it runs in the submitting thread's context (none: none). */
static __always_inline void uv_work_queued(__u64 work)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_unit_key key = {.tgid = pid_tgid >> 32, .kind = KR_UNIT_WORK, .id = work};
	struct kr_thread *t;

	if (!attribution_enabled || !context_watched(pid_tgid))
		return;
	t = current_thread();
	if (t)
		unit_refresh(t, pid_tgid);
	/* always written: the request's memory is reused by later requests */
	unit_set_context(key.tgid, KR_UNIT_WORK, work, t ? thread_handle(t) : 0);
	bpf_map_update_elem(&uv_queued, &key, &(__u8){1}, BPF_ANY);
}

SEC("uprobe")
int BPF_KPROBE(uv_work_submit, void *loop, void *work)
{
	uv_work_queued((__u64)work);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(uv_queue_work, void *loop, void *req)
{
	if (req)
		uv_work_queued((__u64)req + KR_UV_WORK_REQ_OFFSET);
	return 0;
}

/* A pool thread starts a queued request's work function: it carries the request's context. */
SEC("uprobe")
int BPF_KPROBE(uv_work_start, void *work)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_unit_key key = {.tgid = pid_tgid >> 32, .kind = KR_UNIT_WORK, .id = (__u64)work};
	struct kr_thread *t;

	if (!attribution_enabled || !context_watched(pid_tgid))
		return 0;
	t = current_thread();
	if (bpf_map_delete_elem(&uv_queued, &key)) {
		/* a synchronous call (the caller keeps its own context), or, on a pool thread (one
		 * that ran requests), a request the table lost: none, never the last one's */
		if (t && t->unit_kind == KR_UNIT_WORK)
			unit_switch(t, pid_tgid, KR_UNIT_WORK, 0);
		return 0;
	}
	/* a thread without an entry has no context to lose: only a request with one needs it */
	if (!t && !unit_context(pid_tgid >> 32, KR_UNIT_WORK, (__u64)work))
		return 0;
	if (!t)
		t = thread_entry();
	if (t)
		unit_switch(t, pid_tgid, KR_UNIT_WORK, (__u64)work);
	return 0;
}

#endif /* KREPLAY_CAPTURE_UVPOOL_H */
