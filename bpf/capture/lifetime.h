/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How long a request's context lives: the one rule, which every holder of a
 * context obeys (docs/internals.md "Attribution", "Lifetimes").
 *
 * A request's context (a request head read from a connection, a runtime
 * unit's OPEN) lives from its opening to its end:
 *   - the connection's next request head, or its close (units.h);
 *   - the runtime unit's CLOSE (the response completed, where the hook says
 *     so: heads.h);
 *   - for what it was given, the reader turning out to interleave
 *     connections (an event loop: heads.h), whose requests it cannot tell.
 * live_requests holds it while it lives. Whatever it was given to (the
 * thread that read it, threads and processes created while it lived,
 * goroutines, timers, pool work, a channel's or a queue's receiver) holds a
 * lease: that context is used only while live_requests still holds it, one
 * lookup per event; then the holder carries none, counted as outlived by
 * kind of holder. A marker's context (KREPLAY-CTX, `kreplay run`) is no
 * request served here: it lasts until replaced, and so does what inherits it.
 * A head a plain thread sends (a call out, heads.h open_context) ends no
 * later than what it was made under: under a request, the call's context
 * holds that request's lease (kr_thread.lease_id); else it is a request of
 * its own, which its connection's close or the thread's next head or marker
 * ends, and the thread carries what it had before again (kr_thread.outer).
 *
 * A context stored for later (the units map, Go's tables) is a handle: its
 * id, with KR_LEASED when it is a request's. LRU: a live request the table
 * lost ends early (none), never late.
 */
#ifndef KREPLAY_CAPTURE_LIFETIME_H
#define KREPLAY_CAPTURE_LIFETIME_H

#include "maps.h"

#define KR_LEASED (1ULL << 63)
/* a goroutine's own request (a head it read, its marker): no hand-off replaces it (golang.h) */
#define KR_OWNED (1ULL << 62)
#define KR_HANDLE_ID(handle) ((handle) & ~(KR_LEASED | KR_OWNED))

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 131072);
	__type(key, __u64); /* the context id */
	__type(value, __u8);
} live_requests SEC(".maps");

/* A request's context opened: its handle (0 stays 0: none). */
static __always_inline __u64 request_opened(__u64 id)
{
	if (!id)
		return 0;
	bpf_map_update_elem(&live_requests, &id, &(__u8){1}, BPF_ANY);
	return id | KR_LEASED;
}

/* Its request ended: every lease on it is void from now on. */
static __always_inline void request_ended(__u64 handle)
{
	__u64 id = KR_HANDLE_ID(handle);

	if (id)
		bpf_map_delete_elem(&live_requests, &id);
}

static __always_inline bool request_live(__u64 id)
{
	return bpf_map_lookup_elem(&live_requests, &id);
}

/* The context a handle stands for now: 0 when it was a request's that ended (counted under `outlived`). */
static __always_inline __u64 handle_context(__u64 handle, __u32 outlived)
{
	__u64 id = KR_HANDLE_ID(handle);

	if (!(handle & KR_LEASED) || !id || request_live(id))
		return id;
	count_event(outlived);
	return 0;
}

/* The request whose life governs the thread's leased context (kr_thread.lease_id). */
static __always_inline __u64 thread_lease_id(struct kr_thread *t)
{
	return t->lease_id ? t->lease_id : t->context_id;
}

/* Whether the thread's context is a call out's own, a request of its own that ends with the call. */
static __always_inline bool thread_in_own_call(struct kr_thread *t)
{
	return t->lease && t->context_id && t->lease_id == t->context_id;
}

/*
 * The thread's context as a handle, to pass on (what it hands off carries the same lease). A handle
 * names one id: after a call out made under a request, that request's own context.
 */
static __always_inline __u64 thread_handle(struct kr_thread *t)
{
	return t->context_id && t->lease ? thread_lease_id(t) | KR_LEASED : t->context_id;
}

/* The thread carries `handle`'s context now; it counts under `outlived` when its request ends first. */
static __always_inline void thread_hold(struct kr_thread *t, __u64 handle, __u32 outlived)
{
	t->context_id = KR_HANDLE_ID(handle);
	t->lease = handle & KR_LEASED ? outlived : 0;
	t->lease_id = 0;
	t->outer = 0;
}

/* `child`, which `t` created, carries t's context under the same lease, counted under `outlived`. */
static __always_inline void thread_inherit(struct kr_thread *child, struct kr_thread *t, __u32 outlived)
{
	child->context_id = t->context_id;
	child->lease = t->lease ? outlived : 0;
	child->lease_id = t->lease_id;
	child->outer = t->outer;
}

/*
 * Where a thread's calls begin, before its context is used: a lease whose
 * request ended is dropped. A call out's own context that ended gives the
 * thread back the one it was made in (a marker's, or none: uncounted, the
 * thread had none before either). Returns whether the thread lost its
 * context (a unit's thread stays marked for the read programs: units.h).
 */
static __always_inline bool thread_lease_ended(struct kr_thread *t, __u32 tid)
{
	if (!t->lease || !t->context_id || request_live(thread_lease_id(t)))
		return false;
	if (!thread_in_own_call(t))
		count_event(t->lease);
	thread_hold(t, t->outer, 0);
	if (t->context_id)
		return false;
	if (!t->unit_kind)
		forget_thread_context(tid);
	return true;
}

#endif /* KREPLAY_CAPTURE_LIFETIME_H */
