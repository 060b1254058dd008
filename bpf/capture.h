/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Records shared by capture.bpf.c and user space. Only fixed-width plain
 * structs and constants live here: the TypeScript decoder
 * (core/model/record-layout.ts) mirrors these offsets and a unit test
 * compiles this header to prove they still match.
 */
#ifndef KREPLAY_CAPTURE_H
#define KREPLAY_CAPTURE_H

#define KR_COMM_LEN 16
/* Entries of the filter maps (--include/--exclude): pids, comms, cgroup ids. */
#define KR_MAX_FILTER_PIDS 1024
#define KR_MAX_FILTER_COMMS 1024
#define KR_MAX_FILTER_CGROUPS 16384
/* Bytes of a context marker or HTTP head handed to user space for parsing. */
#define KR_CTX_DATA_LEN 1024
/* Bytes of a target's path: KR_TARGET_PATH_MAX, plus room for the last name read. */
#define KR_TARGET_PATH_MAX 1024
#define KR_TARGET_NAME_MAX 256
#define KR_TARGET_DATA_LEN (KR_TARGET_PATH_MAX + KR_TARGET_NAME_MAX)
/*
 * Bytes of a request kept with the send that starts it (the first send on a
 * socket after a response): what `replay --exec` matches responses on.
 */
#define KR_REQUEST_DATA_LEN 128
/*
 * A write reuses a target id only while fewer than this many ids were handed
 * out after it, else the target is sent again: user space can then forget
 * ids older than twice this, and keeps bounded memory.
 */
#define KR_TARGET_ID_WINDOW (1 << 18)

/* The four syscall types share struct kr_syscall; block_io has kr_block_io. */
enum kr_record_type {
	KR_RECORD_SYS_WRITE = 1,
	KR_RECORD_BLOCK_IO = 2,
	KR_RECORD_CONTEXT = 3,
	KR_RECORD_TARGET = 4,
	KR_RECORD_SYS_READ = 5,
	KR_RECORD_SYS_FSYNC = 6,
	KR_RECORD_SYS_CONNECT = 7,
};

/* send(2) is sendto(2) in the kernel, so it is recorded as sendto. */
enum kr_syscall_code {
	KR_SYS_WRITE = 1,
	KR_SYS_WRITEV = 2,
	KR_SYS_PWRITE64 = 3,
	KR_SYS_PWRITEV = 4,
	KR_SYS_PWRITEV2 = 5,
	KR_SYS_SENDTO = 6,
	KR_SYS_SENDMSG = 7,
	KR_SYS_SENDMMSG = 8,
	KR_SYS_SENDFILE = 9,
	KR_SYS_READ = 10,
	KR_SYS_READV = 11,
	KR_SYS_PREAD64 = 12,
	KR_SYS_PREADV = 13,
	KR_SYS_PREADV2 = 14,
	KR_SYS_RECVFROM = 15,
	KR_SYS_RECVMSG = 16,
	KR_SYS_RECVMMSG = 17,
	KR_SYS_FSYNC = 18,
	KR_SYS_FDATASYNC = 19,
	KR_SYS_SYNC_FILE_RANGE = 20,
	KR_SYS_SYNCFS = 21,
	KR_SYS_CONNECT = 22,
};

/* The messages of a sendmmsg/recvmmsg whose bytes are counted. */
#define KR_MAX_MMSG 64

/* What a filter map entry says about the tasks it names. */
enum kr_filter_verdict {
	KR_FILTER_INCLUDE = 1,
	KR_FILTER_EXCLUDE = 2,
};

/*
 * Set on an event whose task the filters exclude, kept only because its
 * thread carries a context: user space drops it when that context turns out
 * to hold no transaction or trace (a bare marker or an untraced HTTP head).
 * In kr_syscall.syscall and kr_block_io.flags.
 */
#define KR_EVENT_CONTEXT_ONLY 0x80000000u
/*
 * --sample-background: a write whose thread has a context is kept in the
 * kernel; when that context holds no transaction or trace, user space
 * samples it. In kr_syscall.syscall.
 */
#define KR_EVENT_SAMPLE_IN_USER 0x40000000u

enum kr_context_kind {
	KR_CONTEXT_MARKER = 1, /* buffer starts with "KREPLAY-CTX" */
	KR_CONTEXT_HTTP = 2, /* a write or send starts like an HTTP/1.x head */
	/* a read from a socket starts with an HTTP/1.x request method: the thread now serves it */
	KR_CONTEXT_HTTP_REQUEST = 3,
	/* a runtime's hook opened a unit for a request whose head it parsed (data: an HTTP/1.x head) */
	KR_CONTEXT_RUNTIME = 4,
};

/* What a runtime schedules on its threads (bpf/capture/units.h). */
enum kr_unit_kind {
	/* what a runtime hook signals (struct kr_unit_signal): a Node async context, an asyncio task */
	KR_UNIT_HOOK = 1,
	KR_UNIT_GOROUTINE = 2,
	KR_UNIT_WORK = 3, /* a libuv threadpool work request */
};

/* The units map's key: user space forgets a process's goroutines by it (native/probes/go_probes.cc). */
struct kr_unit_key {
	__u32 tgid;
	__u32 kind; /* enum kr_unit_kind */
	__u64 id;
};

enum kr_unit_op {
	KR_UNIT_ENTER = 1, /* the thread now runs the unit (0: none) */
	KR_UNIT_OPEN = 2, /* the unit starts serving the request whose head follows */
	/*
	 * from now on the thread's unit is the u64 at these very bytes' `unit` field: the hook stores
	 * the unit it runs there (a plain store, no write per switch), the kernel reads it at each of
	 * the thread's calls (units.h unit_refresh)
	 */
	KR_UNIT_WATCH = 3,
	/* the unit carries the writing thread's context now: work it hands to another thread (a pool's) */
	KR_UNIT_HANDOFF = 4,
	/* the unit's request ended (its response completed): what still carries it loses it (lifetime.h) */
	KR_UNIT_CLOSE = 5,
	/*
	 * the writing thread takes unit `unit`'s context (a HANDOFF's, consumed: a job a queue handed
	 * it), unless it serves a request of its own (kr_thread.owned) or runs units; 0: none
	 */
	KR_UNIT_ADOPT = 6,
	/*
	 * these bytes, laid out as a WATCH's, are the writing thread's mailbox (KR_UNIT_MAILBOX_AT), its
	 * unit untouched: a thread that runs no unit (a server's accepting thread) signals without a write
	 */
	KR_UNIT_MAILBOX = 7,
};

/*
 * A runtime hook's signal: a write(2) of these bytes to KR_UNIT_SIGNAL_FD
 * switches the writing thread's unit; it is never recorded. No descriptor
 * can have that number (fs.nr_open stops below it), so the write fails with
 * EBADF after sys_enter_write has read its bytes: a program that closes and
 * reuses its descriptors never gets the hook's bytes in its files, and the
 * same bytes written anywhere else are the program's own.
 */
#define KR_UNIT_MAGIC "KREPLAY-UNIT"
#define KR_UNIT_SIGNAL_FD 0x7fffffff
struct kr_unit_signal {
	char magic[12];
	__u32 op; /* enum kr_unit_op */
	__u64 unit;
	/* KR_UNIT_OPEN: the request's head follows */
};

/*
 * A signal without a write (heads.h sys_enter_getpriority): a WATCH (or a
 * KR_UNIT_MAILBOX) written with at least KR_UNIT_MAILBOX_AT + sizeof(struct
 * kr_unit_signal) bytes gives its thread a mailbox in the same memory, after
 * the unit field: a u64 length at
 * KR_UNIT_MAILBOX_LEN_AT (0: empty), then a signal at KR_UNIT_MAILBOX_AT. The
 * hook puts a signal there and calls getpriority(PRIO_PROCESS, 0), which the
 * kernel reads it at: a call that cannot fail, touches no file, and costs a
 * JavaScript caller no exception (a write to KR_UNIT_SIGNAL_FD throws one).
 * The hook empties the mailbox after the call, so a getpriority of the
 * program's own finds nothing there.
 */
#define KR_UNIT_MAILBOX_LEN_AT 24
#define KR_UNIT_MAILBOX_AT 32
#define KR_PRIO_PROCESS 0

/*
 * A Go process (bpf/capture/golang.h), as user space found it
 * (native/probes/go_probes.cc): the go_processes map's value.
 */
enum kr_go_state {
	/* which goroutine a thread runs is not known (a stripped binary, one found a moment ago): its events
	   carry none */
	KR_GO_UNFOLLOWED = 1,
	KR_GO_FOLLOWED = 2,
};

/* A process's pointer (a persistConn): the key of golang.h's per-process maps. */
struct kr_go_key {
	__u32 tgid;
	__u32 pad;
	__u64 ptr;
};

/* A Go binary user space inspected, by its file: a process that execs it is marked at once. */
struct kr_go_file {
	__u64 dev; /* the kernel's encoding (major << 20 | minor) */
	__u64 ino;
};

struct kr_go_binary {
	__s64 tls_offset;
	__u32 state; /* enum kr_go_state its processes get */
	__u32 pad;
	__u64 h2_handler_go; /* kr_go_process's */
	__u64 tls_conn_itab; /* kr_go_process's */
	__u32 m_curg; /* kr_go_process's */
	__u32 g_gopc; /* kr_go_process's */
};

struct kr_go_process {
	__s64 tls_offset; /* where a thread's current g is, from its thread pointer */
	/* the context the process had when it exec'd: its goroutines' when they have none of their own */
	__u64 inherited;
	__u32 state; /* enum kr_go_state */
	__u32 pad;
	/*
	 * net/http's HTTP/2 server: from (*http2serverConn).processHeaders' entry to the return address of
	 * its `go sc.runHandler(...)` (the callerpc newproc1 gets); 0 when its streams are not followed
	 */
	__u64 h2_handler_go;
	/*
	 * crypto/tls: from (*tls.Conn).Read's entry to the itab of (*net.TCPConn, net.Conn), which a server's
	 * TLS connection on a TCP socket holds; 0 when its reads are not looked at
	 */
	__u64 tls_conn_itab;
	/*
	 * offsetof(runtime.m, curg) and offsetof(runtime.g, gopc), from the binary's DWARF: a new goroutine's
	 * creator and `go` statement, read where newproc1 makes it; 0 when not known (newproc1's entry is
	 * probed)
	 */
	__u32 m_curg;
	__u32 g_gopc;
};

/* Per-CPU counters, summed by user space. */
enum kr_counter {
	KR_COUNTER_SYS_WRITE_EMITTED = 0,
	KR_COUNTER_SYS_WRITE_DROPPED = 1,
	KR_COUNTER_BLOCK_IO_EMITTED = 2,
	KR_COUNTER_BLOCK_IO_DROPPED = 3,
	KR_COUNTER_CONTEXT_EMITTED = 4,
	KR_COUNTER_CONTEXT_DROPPED = 5,
	/*
	 * a thread's entry could not be made (maps.h threads: another program on the CPU was in a
	 * task-storage call, or no memory): its call is not recorded, or what it was to carry (a context
	 * inherited at fork, a hand-off) it carries not
	 */
	KR_COUNTER_THREAD_ENTRY_LOST = 6,
	/* a block request or a Go TLS read could not be tracked (table full): its event or head is lost */
	KR_COUNTER_REQUEST_TABLE_FULL = 7,
	/* a target record did not fit in the ring: its writes carry no target */
	KR_COUNTER_TARGET_DROPPED = 8,
	KR_COUNTER_TARGET_EMITTED = 9,
	/* writes without a context that --sample-background left out */
	KR_COUNTER_SYS_WRITE_SAMPLED_OUT = 10,
	KR_COUNTER_SYS_READ_EMITTED = 11,
	KR_COUNTER_SYS_READ_DROPPED = 12,
	KR_COUNTER_SYS_FSYNC_EMITTED = 13,
	KR_COUNTER_SYS_FSYNC_DROPPED = 14,
	KR_COUNTER_SYS_CONNECT_EMITTED = 15,
	KR_COUNTER_SYS_CONNECT_DROPPED = 16,
	/* connects in flight (SYN sent, no answer yet) the table had no room for */
	KR_COUNTER_CONNECT_TABLE_FULL = 17,
	/* a request head read by a thread that interleaves connections: it set no context */
	KR_COUNTER_INTERLEAVED_HEAD = 18,
	/*
	 * a request's context outlived its request (bpf/capture/lifetime.h): what still carried it lost it,
	 * by kind of holder: a thread, a process, a goroutine, a runtime unit (a timer, pool work)
	 */
	KR_COUNTER_OUTLIVED_THREAD = 19,
	/* a call on an HTTP/2 connection: its streams' bytes mix, it carries no request */
	KR_COUNTER_MULTIPLEXED_CALL = 20,
	/* a server's read that may bring the next request's first bytes (TLS, a peeked byte): no request */
	KR_COUNTER_UNSURE_READ = 21,
	KR_COUNTER_OUTLIVED_PROCESS = 22,
	KR_COUNTER_OUTLIVED_GOROUTINE = 23,
	KR_COUNTER_OUTLIVED_UNIT = 24,
	/* a call a signal or a stop interrupted, restarted by the kernel: one event from its first entry */
	KR_COUNTER_RESTARTED_CALL = 25,
	/* a call the agent's own hooks interrupted (its ptrace, its signal): restarted, or -EINTR */
	KR_COUNTER_AGENT_INTERRUPTED_CALL = 26,
	/* a thread a JVM made while its creator carried a request: it inherited none (tasks.h) */
	KR_COUNTER_UNINHERITED_JVM_THREAD = 27,
	KR_COUNTER_MAX = 28,
};

/* What a call went to. */
enum kr_target_kind {
	KR_TARGET_FILE = 1,
	KR_TARGET_SOCKET = 2,
	KR_TARGET_PIPE = 3,
	KR_TARGET_CHAR = 4,
	KR_TARGET_ANON = 5,
	KR_TARGET_OTHER = 6,
};

enum kr_target_flag {
	KR_TARGET_TRUNCATED = 1, /* the path lost its leading names (too deep or too long) */
	KR_TARGET_DELETED = 2, /* the file had no link left */
	KR_TARGET_ANON_PIPE = 4, /* a pipe(2), not a named FIFO: no path */
	KR_TARGET_ACCEPTED =
		8, /* an inet connection a listener accepted: addr and port are its local (listening) ones */
};

/*
 * sys_write, sys_read, sys_fsync and sys_connect. A connect's duration runs
 * from its SYN to the connection's established or closed state (however the
 * caller waited), its ret is 0 or the connection's negative errno.
 */
struct kr_syscall {
	__s64 ret; /* bytes, messages (mmsg), 0, or negative errno */
	__u64 count; /* bytes asked for (iovec total for the v variants, sent/received bytes for mmsg) */
	__s32 fd;
	__u32 syscall; /* enum kr_syscall_code, | KR_EVENT_CONTEXT_ONLY / KR_EVENT_SAMPLE_IN_USER */
	__u64 target_id; /* a kr_target record defined it earlier; 0: unknown (bad fd) */
	/* sys_read of a socket, first after a send on it: end of that send to end of this read; 0: none */
	__u64 response_ns;
};

struct kr_block_io {
	__u64 sector;
	__u32 bytes;
	__u32 dev_major;
	__u32 dev_minor;
	__u32 op; /* REQ_OP_* of the request */
	__s32 status; /* blk_status_t at completion, 0 = success */
	__u32 flags; /* KR_EVENT_CONTEXT_ONLY or 0 */
};

/* One traced call or request; every field is known when it is submitted. */
struct kr_event {
	__u32 type; /* enum kr_record_type */
	__u32 size; /* bytes of this record */
	__u64 start_ns; /* CLOCK_BOOTTIME */
	__u64 duration_ns;
	__u64 cgroup_id;
	__u64 context_id; /* 0: no context */
	__u32 pid; /* tgid */
	__u32 tid;
	char comm[KR_COMM_LEN];
	union {
		struct kr_syscall call;
		struct kr_block_io block;
	};
};

/*
 * A sys_write that started a request on a socket: the event, then the
 * request's first bytes (kr_event.size tells the two sizes apart).
 */
struct kr_request_bytes {
	__u32 len; /* valid bytes in data */
	__u32 pad;
	char data[KR_REQUEST_DATA_LEN];
};

struct kr_request_event {
	struct kr_event event;
	struct kr_request_bytes request;
};

/*
 * A thread wrote a context marker or an HTTP head: from now on its events
 * and those of the tasks it creates carry context_id. User space parses
 * data; when it holds no valid context, context_id means what parent_id
 * means.
 */
struct kr_context {
	__u32 type; /* KR_RECORD_CONTEXT */
	__u32 size;
	__u64 context_id;
	__u64 parent_id;
	__u64 at_ns; /* CLOCK_BOOTTIME */
	__u32 pid;
	__u32 tid;
	__u32 kind; /* enum kr_context_kind */
	__u32 len; /* valid bytes in data */
	char data[KR_CTX_DATA_LEN];
};

/*
 * Defines target_id: sent once per file, socket peer or kind of pipe the
 * first time a write goes to it (again when the kernel's cache forgot it),
 * always before the first event that carries the id.
 */
struct kr_target {
	__u32 type; /* KR_RECORD_TARGET */
	__u32 size; /* the head and len bytes of data, rounded up to 8 */
	__u64 target_id;
	__u32 kind; /* enum kr_target_kind */
	__u32 flags; /* enum kr_target_flag */
	__u16 family; /* sockets: AF_*; 0 for the rest */
	__u16 protocol; /* inet sockets: IPPROTO_*; unix: SOCK_* type */
	__u16 port; /* inet peer port, host order */
	__u16 len; /* bytes of data used */
	__u8 addr[16]; /* inet peer: IPv4 in the first 4 bytes, or IPv6 */
	/*
	 * Paths: the names from the file up to the root, leaf first, each
	 * NUL-terminated ("null\0dev\0" is /dev/null). Unix sockets: sun_path
	 * of the address, its first byte 0 for an abstract one.
	 */
	char data[KR_TARGET_DATA_LEN];
};

#endif /* KREPLAY_CAPTURE_H */
