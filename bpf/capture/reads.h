/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * sys_read: the read and recv families, for threads that carry a context
 * (all threads with --capture-reads). A thread without one costs a single
 * load of its bit in context_threads at each end. A socket's first read
 * after a send on it carries the response time.
 */
#ifndef KREPLAY_CAPTURE_READS_H
#define KREPLAY_CAPTURE_READS_H

#define KR_EAGAIN 11

static __always_inline int read_enter(struct trace_event_raw_sys_enter *ctx, __u32 code, __u32 how)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_thread *t;
	__u64 count, first_len;

	if (!capture_reads && !thread_has_context((__u32)pid_tgid))
		return 0;
	t = call_thread(pid_tgid, &code);
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
	__u64 pid_tgid, now, response_ns = 0, *sent;
	struct kr_thread *t;
	__s64 ret = ctx->ret;

	if (sniff && attribution_enabled)
		request_head_read(ctx, how);
	if (!capture_reads && !thread_has_context((__u32)bpf_get_current_pid_tgid()))
		return 0;
	t = call_exit(KR_RECORD_SYS_READ, &pid_tgid);
	if (!t)
		return 0;
	now = bpf_ktime_get_boot_ns();
	/*
	 * A non-blocking read that found nothing yet is not the response; the end of the stream
	 * ends the exchange without one (a server's idle keep-alive read is no upstream wait).
	 */
	if (t->sock && ret != -KR_EAGAIN) {
		sent = bpf_map_lookup_elem(&last_sends, &t->sock);
		if (sent) {
			if (ret != 0 && *sent < now)
				response_ns = now - *sent;
			bpf_map_delete_elem(&last_sends, &t->sock);
		}
	}
	call_end(t, KR_RECORD_SYS_READ, pid_tgid, ret,
		 how == KR_MMSG ? mmsg_bytes(t->messages, ret) : t->count, now, response_ns);
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
