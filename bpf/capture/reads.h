/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * sys_read: the read and recv families, for threads that carry a context
 * (all threads with --capture-reads). A thread without one costs a single
 * load of its bit in context_threads at each end. A socket's first read
 * after a send on it carries the response time, and so does a later read
 * of a call out that follows an EAGAIN (a wait that came after the first
 * bytes of the answer).
 */
#ifndef KREPLAY_CAPTURE_READS_H
#define KREPLAY_CAPTURE_READS_H

#include "../capture.h"
#include "maps.h"
#include "targets.h"
#include "units.h"
#include "heads.h"
#include "tls.h"
#include "golang.h"
#include "calls.h"

#define KR_EAGAIN 11

/*
 * A call out's answer may come in parts with a wait between them: TLS 1.3
 * servers send their session tickets at once and the response when it is
 * ready, and a non-blocking reader (Python's ssl under a timeout, Go, libuv)
 * reads the tickets, finds the socket empty (EAGAIN) and waits in poll for
 * the rest. The first read after the send carries the wait for the first
 * part; this keeps, per sock, when its last data was read and whether the
 * reader has since found it empty, so the read that ends the next wait
 * carries that wait (from the last data read) too. Not for connections a
 * listener accepted: a server that finds one empty waits for the next
 * request, not for an answer. Until the next send or the stream's end.
 */
struct kr_answer {
	__u64 last_data_ns;
	__u64 drained;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* the sock */
	__type(value, struct kr_answer);
} answers SEC(".maps");

/* The wait a data read of sock carries: from the send, or after an EAGAIN from the last data. */
static __always_inline __u64 response_time(__u64 sock, __u64 now)
{
	__u64 *sent = bpf_map_lookup_elem(&last_sends, &sock), at = sent ? *sent : 0;
	struct kr_answer *answer, first = {.last_data_ns = now};
	__u64 waited = 0;

	if (at) {
		if (at < now)
			waited = now - at;
		/* answered: 0 in place, the entry kept for the sock's next send (calls.h) */
		*sent = 0;
		if (!bpf_map_lookup_elem(&accepted_socks, &sock))
			bpf_map_update_elem(&answers, &sock, &first, BPF_ANY);
		return waited;
	}
	answer = bpf_map_lookup_elem(&answers, &sock);
	if (!answer)
		return 0;
	if (answer->drained && answer->last_data_ns < now)
		waited = now - answer->last_data_ns;
	answer->last_data_ns = now;
	answer->drained = 0;
	return waited;
}

static __always_inline int read_enter(struct trace_event_raw_sys_enter *ctx, __u32 code, __u32 how)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	/* a Go thread's verdict and entry are looked up once, for its goroutine and its call */
	bool go = go_marked(pid_tgid >> 32), wanted = go && current_wanted(pid_tgid >> 32);
	struct kr_thread *t = go ? go_refresh_wanted(pid_tgid, wanted) : NULL;
	__u64 count, first_len;

	if (!capture_reads && !thread_has_context((__u32)pid_tgid))
		return 0;
	t = call_thread_of(pid_tgid, go ? wanted : current_wanted(pid_tgid >> 32), t, &code);
	if (!t)
		return 0;
	if (how == KR_MMSG)
		t->messages = ctx->args[1];
	call_data(ctx, how, &first_len, &count);
	call_begin(ctx, t, KR_RECORD_SYS_READ, code, ctx->args[0], count);
	return 0;
}

/*
 * An HTTP request head read sets the thread's context first, so the read
 * that brought it belongs to the request it starts.
 */
static __always_inline int read_exit(struct trace_event_raw_sys_exit *ctx, __u32 how, bool sniff)
{
	__u64 pid_tgid, now, response_ns = 0, context_id;
	struct kr_thread *t;
	__s64 ret = ctx->ret;

	if (sniff && attribution_enabled)
		request_head_read(ctx, how);
	if (!capture_reads && !thread_has_context((__u32)bpf_get_current_pid_tgid()))
		return 0;
	t = call_exit(KR_RECORD_SYS_READ, ret, &pid_tgid);
	if (!t)
		return 0;
	tls_read_socket((__u32)pid_tgid, t);
	now = bpf_ktime_get_boot_ns();
	/*
	 * A non-blocking read that found nothing yet is not the response (it marks the reader
	 * waiting); the end of the stream ends the exchange without one (a server's idle
	 * keep-alive read is no upstream wait); a failure is the answer the call got.
	 */
	if (t->sock && ret == -KR_EAGAIN) {
		struct kr_answer *answer = bpf_map_lookup_elem(&answers, &t->sock);

		if (answer)
			answer->drained = 1;
	} else if (t->sock && ret == 0) {
		bpf_map_delete_elem(&last_sends, &t->sock);
		bpf_map_delete_elem(&answers, &t->sock);
	} else if (t->sock) {
		response_ns = response_time(t->sock, now);
	}
	context_id = read_context(t);
	/* a thread looked at for its unit or its TLS call, whose read belongs to no request */
	if (!capture_reads && !context_id)
		return 0;
	call_end(t, KR_RECORD_SYS_READ, pid_tgid, ret,
		 how == KR_MMSG ? mmsg_bytes(t->messages, ret) : t->count, now, response_ns, context_id);
	return 0;
}

#define READ_PROGRAMS(name, code, how, sniff)                                                                \
	SEC("tracepoint/syscalls/sys_enter_" #name)                                                          \
	int sys_enter_##name(struct trace_event_raw_sys_enter *ctx)                                          \
	{                                                                                                    \
		return read_enter(ctx, code, how);                                                           \
	}                                                                                                    \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                                           \
	int sys_exit_##name(struct trace_event_raw_sys_exit *ctx)                                            \
	{                                                                                                    \
		return read_exit(ctx, how, sniff);                                                           \
	}

/* request heads arrive by read, readv, recv and recvmsg */
READ_PROGRAMS(read, KR_SYS_READ, KR_BUF, true)
READ_PROGRAMS(readv, KR_SYS_READV, KR_IOV, true)
READ_PROGRAMS(pread64, KR_SYS_PREAD64, KR_BUF, false)
READ_PROGRAMS(preadv, KR_SYS_PREADV, KR_IOV, false)
READ_PROGRAMS(preadv2, KR_SYS_PREADV2, KR_IOV, false)
READ_PROGRAMS(recvfrom, KR_SYS_RECVFROM, KR_BUF, true)
READ_PROGRAMS(recvmsg, KR_SYS_RECVMSG, KR_MSG, true)
READ_PROGRAMS(recvmmsg, KR_SYS_RECVMMSG, KR_MMSG, false)

#endif /* KREPLAY_CAPTURE_READS_H */
