/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* sys_fsync: fsync, fdatasync, sync_file_range and syncfs, always recorded (rare, and worth it). */
#ifndef KREPLAY_CAPTURE_FSYNC_H
#define KREPLAY_CAPTURE_FSYNC_H

#include "../capture.h"
#include "maps.h"
#include "golang.h"
#include "calls.h"

/* count: the bytes asked for (sync_file_range), else 0 */
static __always_inline int fsync_enter(struct trace_event_raw_sys_enter *ctx, __u32 code, __u64 count)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_thread *t;

	go_refresh(pid_tgid);
	t = call_thread(pid_tgid, &code);
	if (t)
		call_begin(ctx, t, KR_RECORD_SYS_FSYNC, code, ctx->args[0], count);
	return 0;
}

static __always_inline int fsync_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 pid_tgid;
	__s64 ret = ctx->ret;
	struct kr_thread *t = call_exit(KR_RECORD_SYS_FSYNC, ret, &pid_tgid);

	if (t)
		call_end(t, KR_RECORD_SYS_FSYNC, pid_tgid, ret, t->count, bpf_ktime_get_boot_ns(), 0,
			 t->context_id);
	return 0;
}

#define FSYNC_PROGRAMS(name, code, count)                                                                    \
	SEC("tracepoint/syscalls/sys_enter_" #name)                                                          \
	int sys_enter_##name(struct trace_event_raw_sys_enter *ctx)                                          \
	{                                                                                                    \
		return fsync_enter(ctx, code, count);                                                        \
	}                                                                                                    \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                                           \
	int sys_exit_##name(struct trace_event_raw_sys_exit *ctx)                                            \
	{                                                                                                    \
		return fsync_exit(ctx);                                                                      \
	}

FSYNC_PROGRAMS(fsync, KR_SYS_FSYNC, 0)
FSYNC_PROGRAMS(fdatasync, KR_SYS_FDATASYNC, 0)
/* sync_file_range(fd, offset, nbytes, flags) */
FSYNC_PROGRAMS(sync_file_range, KR_SYS_SYNC_FILE_RANGE, ctx->args[2])
FSYNC_PROGRAMS(syncfs, KR_SYS_SYNCFS, 0)

#endif /* KREPLAY_CAPTURE_FSYNC_H */
