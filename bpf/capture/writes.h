/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * sys_write: the write family and the send family (send is sendto in the
 * kernel). Their first bytes may also set the thread's context.
 */
#ifndef KREPLAY_CAPTURE_WRITES_H
#define KREPLAY_CAPTURE_WRITES_H

#include "../capture.h"
#include "maps.h"
#include "restarts.h"
#include "units.h"
#include "heads.h"
#include "golang.h"
#include "calls.h"

/*
 * The filter verdict comes first, so that an excluded write costs its
 * lookups and, unless --filter-transactions, one look at its first bytes
 * (markers are seen everywhere) and whether its thread has a context.
 */
static __always_inline int write_enter(struct trace_event_raw_sys_enter *ctx, __u32 code, __u32 how)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	const void *data;
	__u64 count, data_len;
	struct kr_thread *t;
	bool wanted = current_wanted(pid_tgid >> 32);
	bool signal = false;

	/* a Go thread's entry, its goroutine's context taken: not looked up again */
	t = go_refresh_wanted(pid_tgid, wanted);
	if (!wanted) {
		if (pid_tgid >> 32 == self_tgid || !attribution_enabled || filter_transactions)
			return 0;
		if (!t)
			t = current_thread();
	} else if (!t) {
		t = thread_entry();
		if (!t)
			return 0;
	}
	data = call_data(ctx, how, &data_len, &count);
	if (t) {
		t->opened = 0;
		t->preface = 0;
		unit_refresh(t, pid_tgid);
	}
	/* only a write(2) to the descriptor no file can have is a hook's signal (bpf/capture.h) */
	t = context_source(t, pid_tgid, ctx->args[0], data, data_len,
			   code == KR_SYS_WRITE && (__u32)ctx->args[0] == KR_UNIT_SIGNAL_FD ? &signal : NULL);
	if (!t || signal)
		return 0;
	if (!wanted) {
		if (!t->context_id && !t->opened)
			return 0;
		code |= KR_EVENT_CONTEXT_ONLY;
	} else if (sample_background > 1 && t->parked != KR_PARK_PENDING) {
		/* a restart (of a pending call) goes where its first entry went */
		if (t->context_id)
			code |= KR_EVENT_SAMPLE_IN_USER;
		else if (bpf_get_prandom_u32() % sample_background) {
			count_event(KR_COUNTER_SYS_WRITE_SAMPLED_OUT);
			return 0;
		}
	}
	if (how == KR_MMSG)
		t->messages = ctx->args[1];
	/* before call_begin, which may end in a tail call */
	t->data = how == KR_MMSG ? 0 : (__u64)data;
	t->data_len = data_len;
	call_begin(ctx, t, KR_RECORD_SYS_WRITE, code, ctx->args[0], count);
	return 0;
}

/*
 * The event of a send that starts a request (the first on its socket since a
 * response was read), with the request's first bytes.
 */
static __always_inline void request_end(struct kr_thread *t, __u64 pid_tgid, __s64 ret, __u64 now)
{
	struct kr_request_event *r;
	__u64 len = t->data_len < (__u64)ret ? t->data_len : (__u64)ret;

	if (now - t->start_ns < min_duration_ns)
		return;
	r = (struct kr_request_event *)reserve_record(KR_RECORD_SYS_WRITE, KR_COUNTER_SYS_WRITE_DROPPED,
						      t->start_ns, now, sizeof(*r));
	if (!r)
		return;
	call_fill(&r->event, t, pid_tgid, ret, t->count, 0, event_context(t));
	if (len > KR_REQUEST_DATA_LEN)
		len = KR_REQUEST_DATA_LEN;
	r->request.len = bpf_probe_read_user(r->request.data, len, (const void *)t->data) ? 0 : len;
	r->request.pad = 0;
	submit(r, sizeof(*r));
	count_event(KR_COUNTER_SYS_WRITE_EMITTED);
}

static __always_inline int write_exit(struct trace_event_raw_sys_exit *ctx, __u32 how)
{
	__u64 pid_tgid, now;
	/* read once: the verifier refuses a load through a ctx pointer the compiler moved */
	__s64 ret = ctx->ret;
	struct kr_thread *t = call_exit(KR_RECORD_SYS_WRITE, ret, &pid_tgid);
	bool starts = false;

	if (!t)
		return 0;
	now = bpf_ktime_get_boot_ns();
	/*
	 * A response is timed from the end of the socket's last send; only where reads are
	 * recorded. A send that starts a request gives a client's connection the sender's
	 * context; one by a thread without a context leaves it none.
	 */
	if (t->preface && t->sock && ret > 0) {
		/* a client's HTTP/2 connection: its calls mix streams, they carry no request */
		conn_set(conn_of(t->sock, t->sock_stamp), t->sock, t->sock_stamp, 0, KR_CONN_MULTIPLEXED);
	} else if (t->sock && ret > 0 && (t->context_id || t->opened || capture_reads)) {
		__u64 *sent = bpf_map_lookup_elem(&last_sends, &t->sock);

		starts = t->data && (!sent || !*sent);
		/* in place when the sock has an entry: an LRU update allocates a node and frees the old */
		if (sent)
			*sent = now;
		else
			bpf_map_update_elem(&last_sends, &t->sock, &now, BPF_ANY);
		/* a head sent after another, no answer between (pipelining), starts a request too; a
		 * response that opened no record was sent on a connection where none starts (heads.h) */
		if ((starts || t->opened) && t->opened != KR_OPENED_NO_RECORD)
			conn_request_started(t, t->opened ? t->opened : t->context_id);
	} else if (t->sock && ret > 0) {
		conn_request_started(t, 0);
	}
	if (starts)
		request_end(t, pid_tgid, ret, now);
	else
		call_end(t, KR_RECORD_SYS_WRITE, pid_tgid, ret,
			 how == KR_MMSG ? mmsg_bytes(t->messages, ret) : t->count, now, 0, event_context(t));
	return 0;
}

#define WRITE_PROGRAMS(name, code, how)                                                                      \
	SEC("tracepoint/syscalls/sys_enter_" #name)                                                          \
	int sys_enter_##name(struct trace_event_raw_sys_enter *ctx)                                          \
	{                                                                                                    \
		return write_enter(ctx, code, how);                                                          \
	}                                                                                                    \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                                           \
	int sys_exit_##name(struct trace_event_raw_sys_exit *ctx)                                            \
	{                                                                                                    \
		return write_exit(ctx, how);                                                                 \
	}

WRITE_PROGRAMS(write, KR_SYS_WRITE, KR_BUF)
WRITE_PROGRAMS(writev, KR_SYS_WRITEV, KR_IOV)
WRITE_PROGRAMS(pwrite64, KR_SYS_PWRITE64, KR_BUF)
WRITE_PROGRAMS(pwritev, KR_SYS_PWRITEV, KR_IOV)
WRITE_PROGRAMS(pwritev2, KR_SYS_PWRITEV2, KR_IOV)
WRITE_PROGRAMS(sendto, KR_SYS_SENDTO, KR_BUF)
WRITE_PROGRAMS(sendmsg, KR_SYS_SENDMSG, KR_MSG)
WRITE_PROGRAMS(sendmmsg, KR_SYS_SENDMMSG, KR_MMSG)
/* sendfile(2) is sendfile64 on 64-bit kernels */
WRITE_PROGRAMS(sendfile64, KR_SYS_SENDFILE, KR_NO_BUF)

#endif /* KREPLAY_CAPTURE_WRITES_H */
