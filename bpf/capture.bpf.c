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
#include <bpf/bpf_endian.h>
#include "capture.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

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

/* Last context id handed out; ids start at 1 so 0 can mean "none". */
__u64 last_context_id = 0;
/* Last target id handed out, likewise. */
__u64 last_target_id = 0;

/* Linux 6.2+: lets the hot path load file and socket fields directly instead of a helper call each. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

#define KR_MAX_IOVECS 64
/* how a read call names its buffer */
#define KR_RECV_BUF 0
#define KR_RECV_IOV 1
#define KR_RECV_MSG 2
#define KR_EEXIST 17
#define KR_REQ_OP_MASK 0xff
#define KR_REQ_OP_FLUSH 2

struct kr_thread {
	__u64 start_ns;
	__u64 count;
	__u64 context_id;
	__s32 fd;
	__u32 syscall; /* enum kr_syscall in flight, 0 = none */
	__u64 target_id; /* of the write in flight */
	/* the last target this thread wrote to: most writes go where the previous one went */
	__u64 last_object;
	__u64 last_stamp;
	__u64 last_target_id;
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
	__u32 flags; /* KR_EVENT_CONTEXT_ONLY or 0 */
	__u32 _pad;
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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct kr_request);
} requests SEC(".maps");

/* A target already sent to user space, valid while its object's stamp is unchanged. */
struct kr_known_target {
	__u64 stamp;
	__u64 target_id;
};

/* Keyed by the dentry (files, devices, FIFOs), the sock, or a constant (pipes). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct kr_known_target);
} known_targets SEC(".maps");

/* Where a target record is put together before it goes into the ring at its own length. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kr_target);
} target_scratch SEC(".maps");

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
 * Whether the current task passes --include/--exclude: an exclusion wins,
 * then, when includes are in force, one must match. One hash lookup per
 * kind of selector in use, the task's fields read directly (no helper).
 */
static __always_inline bool current_wanted(__u32 tgid)
{
	bool included = !filter_includes;

	if (tgid == self_tgid)
		return false;
	if (filter_by_pid && filter_excludes(&filter_pids, &tgid, &included))
		return false;
	if (filter_by_cgroup) {
		__u64 cgroup_id = current_cgroup_id();

		if (filter_excludes(&filter_cgroups, &cgroup_id, &included))
			return false;
	}
	if (filter_by_comm) {
		struct task_struct *task = bpf_get_current_task_btf();
		struct kr_comm_key key;

		__builtin_memcpy(key.comm, task->comm, sizeof(key.comm));
		if (filter_excludes(&filter_comms, &key, &included))
			return false;
	}
	return included;
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
#define LOW(w, n) ((w) & ((1ULL << ((n)*8)) - 1))
#define LETTER(c) (1U << ((c) - 'A'))
/* first letters of "HTTP/1." and of the method tokens */
#define HTTP_FIRST_LETTERS                                                                                   \
	(LETTER('C') | LETTER('D') | LETTER('G') | LETTER('H') | LETTER('O') | LETTER('P') | LETTER('T'))
/* "GET " and "PUT " are the shortest tokens */
#define MIN_TOKEN_LEN 4

static __always_inline bool is_marker(__u64 w0, __u64 w1, __u64 len)
{
	char next = w1 >> 24;

	if (w0 != W8('K', 'R', 'E', 'P', 'L', 'A', 'Y', '-') || LOW(w1, 3) != W4('C', 'T', 'X', 0))
		return false;
	return (len == 11 && !next) || next == ' ' || next == '\t' || next == '\n' || next == '\r';
}

static __always_inline bool is_http_request(__u64 w0)
{
	return LOW(w0, 4) == W4('G', 'E', 'T', ' ') || LOW(w0, 4) == W4('P', 'U', 'T', ' ') ||
	       LOW(w0, 5) == W8('P', 'O', 'S', 'T', ' ', 0, 0, 0) ||
	       LOW(w0, 5) == W8('H', 'E', 'A', 'D', ' ', 0, 0, 0) ||
	       LOW(w0, 6) == W8('P', 'A', 'T', 'C', 'H', ' ', 0, 0) ||
	       LOW(w0, 6) == W8('T', 'R', 'A', 'C', 'E', ' ', 0, 0) ||
	       LOW(w0, 7) == W8('D', 'E', 'L', 'E', 'T', 'E', ' ', 0) ||
	       w0 == W8('O', 'P', 'T', 'I', 'O', 'N', 'S', ' ') ||
	       w0 == W8('C', 'O', 'N', 'N', 'E', 'C', 'T', ' ');
}

static __always_inline bool is_http_head(__u64 w0)
{
	return is_http_request(w0) || LOW(w0, 7) == W8('H', 'T', 'T', 'P', '/', '1', '.', 0);
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

#define KR_S_IFMT 0170000
#define KR_S_IFSOCK 0140000
#define KR_S_IFREG 0100000
#define KR_S_IFCHR 0020000
#define KR_S_IFIFO 0010000
#define KR_PIPEFS_MAGIC 0x50495045
#define KR_ANON_INODE_FS_MAGIC 0x09041934
#define KR_AF_UNIX 1
#define KR_AF_INET 2
#define KR_AF_INET6 10
/* the cache key of every anonymous pipe: they all have the target "pipe" */
#define KR_PIPE_OBJECT 1
#define KR_TARGET_MAX_DEPTH 48

#define RDONLY(type, ptr) ((type *)bpf_rdonly_cast((ptr), bpf_core_type_id_kernel(type)))

/* What a write's fd refers to, and what tells when the cached description of it went stale. */
struct kr_target_probe {
	struct file *file;
	struct sock *sk;
	__u64 object;
	__u64 stamp;
	__u32 kind;
	__u32 flags;
};

/* The file behind fd in the current task, or NULL. */
static __always_inline struct file *current_file(__s32 fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = task->files->fdt;
	struct file **fds;
	struct file *file;

	if (fd < 0 || (__u32)fd >= fdt->max_fds)
		return NULL;
	/* cast to void: a read-only view whose loads the kernel guards like a probe read, without the call */
	fds = bpf_rdonly_cast(fdt->fd, 0);
	file = fds[fd & 0xfffff];
	return file ? RDONLY(struct file, file) : NULL;
}

/*
 * A socket's stamp: what tells its peer, which connect() may change while
 * the file stays: the inet address and ports, or the hash a unix peer has
 * (of its bound name, else of itself).
 */
static __always_inline __u64 socket_stamp(struct sock *sk)
{
	struct sock_common *c = &sk->__sk_common;
	__u64 stamp = c->skc_addrpair ^ ((__u64)c->skc_portpair << 32) ^ c->skc_family;

	if (c->skc_family == KR_AF_INET6) {
		stamp ^= c->skc_v6_daddr.in6_u.u6_addr32[0] ^ (__u64)c->skc_v6_daddr.in6_u.u6_addr32[1] << 32;
		stamp ^= c->skc_v6_daddr.in6_u.u6_addr32[2] ^ (__u64)c->skc_v6_daddr.in6_u.u6_addr32[3] << 16;
	} else if (c->skc_family == KR_AF_UNIX) {
		/* no peer (NULL) loads as 0 */
		stamp ^= (__u64)RDONLY(struct unix_sock, sk)->peer->__sk_common.skc_hash << 8;
	}
	return stamp;
}

/*
 * Classifies the file by its inode and finds the object its description
 * belongs to: a few direct loads, no helper call.
 */
static __always_inline void probe_target(struct file *file, struct kr_target_probe *p)
{
	struct inode *inode = file->f_inode;
	struct dentry *dentry = file->f_path.dentry;
	__u32 mode = inode->i_mode & KR_S_IFMT;
	/* a freed dentry or sock reused for another file or connection comes with another inode */
	__u64 ino = inode->i_ino;

	p->file = file;
	p->object = (__u64)dentry;
	/* the name's hash is salted with its parent: a rename or a reused dentry changes it */
	p->stamp = dentry->d_name.hash_len ^ ino;
	p->flags = 0;
	if (mode == KR_S_IFSOCK) {
		struct socket *sock = RDONLY(struct socket, file->private_data);

		p->kind = KR_TARGET_SOCKET;
		p->sk = sock->sk;
		p->object = (__u64)p->sk;
		p->stamp = socket_stamp(p->sk) ^ ino << 32;
	} else if (mode == KR_S_IFIFO) {
		p->kind = KR_TARGET_PIPE;
		if (inode->i_sb->s_magic == KR_PIPEFS_MAGIC) {
			p->flags = KR_TARGET_ANON_PIPE;
			p->object = KR_PIPE_OBJECT;
			p->stamp = 0;
		}
	} else if (mode == KR_S_IFCHR) {
		p->kind = KR_TARGET_CHAR;
	} else if (inode->i_sb->s_magic == KR_ANON_INODE_FS_MAGIC) {
		/* checked before S_IFREG: newer kernels give anonymous inodes that mode */
		p->kind = KR_TARGET_ANON;
	} else if (mode == KR_S_IFREG) {
		p->kind = KR_TARGET_FILE;
	} else {
		p->kind = KR_TARGET_OTHER;
	}
}

/*
 * Appends the names from the file's dentry up to the root of its mount
 * namespace, leaf first, crossing mount points as d_path() does. Bounded
 * in depth and bytes; what does not fit is flagged as truncated.
 */
static __always_inline __u32 read_path(struct kr_target *rec, struct file *file)
{
	struct dentry *dentry = BPF_CORE_READ(file, f_path.dentry);
	struct vfsmount *vfsmnt = BPF_CORE_READ(file, f_path.mnt);
	struct mount *mnt = container_of(vfsmnt, struct mount, mnt);
	__u32 off = 0;

	for (int i = 0; i < KR_TARGET_MAX_DEPTH; i++) {
		struct dentry *parent = BPF_CORE_READ(dentry, d_parent);
		struct dentry *root = BPF_CORE_READ(vfsmnt, mnt_root);
		const unsigned char *name;
		long n;

		if (dentry == root) {
			struct mount *up = BPF_CORE_READ(mnt, mnt_parent);

			/* the root of a mount: go on from where it is mounted, unless it is the top */
			if (up == mnt)
				return off;
			dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = up;
			vfsmnt = &up->mnt;
			continue;
		}
		if (off >= KR_TARGET_PATH_MAX)
			break;
		name = BPF_CORE_READ(dentry, d_name.name);
		n = bpf_probe_read_kernel_str(&rec->data[off & (KR_TARGET_PATH_MAX - 1)], KR_TARGET_NAME_MAX,
					      name);
		if (n <= 0)
			break;
		off += n;
		/* a pseudo file (anonymous inode, memfd) is its own parent: its name is all there is */
		if (dentry == parent)
			return off;
		dentry = parent;
	}
	rec->flags |= KR_TARGET_TRUNCATED;
	return off > KR_TARGET_PATH_MAX ? KR_TARGET_PATH_MAX : off;
}

/* The peer of an inet socket, or the address of a unix one (its peer's if bound, else its own). */
static __always_inline __u32 read_peer(struct kr_target *rec, struct sock *sk)
{
	struct unix_address *ua;
	struct sock *peer;
	__u32 len;

	rec->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	rec->protocol = rec->family == KR_AF_UNIX ? BPF_CORE_READ_BITFIELD_PROBED(sk, sk_type)
						  : BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol);
	if (rec->family == KR_AF_INET) {
		__u32 daddr = BPF_CORE_READ(sk, __sk_common.skc_daddr);

		__builtin_memcpy(rec->addr, &daddr, sizeof(daddr));
		rec->port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	} else if (rec->family == KR_AF_INET6) {
		bpf_core_read(rec->addr, sizeof(rec->addr), &sk->__sk_common.skc_v6_daddr);
		rec->port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	} else if (rec->family == KR_AF_UNIX) {
		peer = BPF_CORE_READ((struct unix_sock *)sk, peer);
		ua = peer ? BPF_CORE_READ((struct unix_sock *)peer, addr) : NULL;
		if (!ua)
			ua = BPF_CORE_READ((struct unix_sock *)sk, addr);
		if (!ua)
			return 0;
		/* len counts sun_family and the path (a NUL after a path name, none after an abstract one) */
		len = BPF_CORE_READ(ua, len) - sizeof(__u16);
		barrier_var(len);
		if (len == 0 || len > KR_TARGET_PATH_MAX)
			return 0;
		if (bpf_probe_read_kernel(rec->data, len, &ua->name[0].sun_path))
			return 0;
		return len;
	}
	return 0;
}

/* Puts the target record into the ring at its own length; false when the ring is full. */
static __always_inline bool send_target(struct kr_target_probe *p, __u64 target_id)
{
	__u32 zero = 0;
	struct kr_target *rec = bpf_map_lookup_elem(&target_scratch, &zero);
	struct file *file = p->file;
	__u32 len = 0;
	__u64 size, unread;

	if (!rec)
		return false;
	rec->type = KR_RECORD_TARGET;
	rec->target_id = target_id;
	rec->kind = p->kind;
	rec->flags = p->flags;
	rec->family = 0;
	rec->protocol = 0;
	rec->port = 0;
	__builtin_memset(rec->addr, 0, sizeof(rec->addr));
	if (p->kind == KR_TARGET_SOCKET)
		len = read_peer(rec, p->sk);
	else if (!(p->flags & KR_TARGET_ANON_PIPE)) {
		len = read_path(rec, file);
		if (!BPF_CORE_READ(file, f_inode, i_nlink))
			rec->flags |= KR_TARGET_DELETED;
	}
	rec->len = len;
	size = (offsetof(struct kr_target, data) + len + 7) & ~7ULL;
	if (size > sizeof(*rec))
		size = sizeof(*rec);
	rec->size = size;
	unread = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	if (bpf_ringbuf_output(&events, rec, size,
			       (unread + size) / wakeup_data_bytes != unread / wakeup_data_bytes
				       ? BPF_RB_FORCE_WAKEUP
				       : BPF_RB_NO_WAKEUP)) {
		count_event(KR_COUNTER_TARGET_DROPPED);
		return false;
	}
	count_event(KR_COUNTER_TARGET_EMITTED);
	return true;
}

/*
 * The target id of a write to fd: the thread's last one when it writes to
 * the same object again, else the cached one, else a new id whose record
 * goes into the ring first; an id older than KR_TARGET_ID_WINDOW is
 * replaced. 0 when the fd is not open or the record was lost.
 */
static __always_inline __u64 write_target(struct kr_thread *t, __s32 fd)
{
	struct kr_target_probe p = {};
	struct kr_known_target *known, fresh;
	struct file *file;
	__u64 newest;

	if (!bpf_rdonly_cast)
		return 0;
	file = current_file(fd);
	if (!file)
		return 0;
	probe_target(file, &p);
	newest = last_target_id;
	if (p.object == t->last_object && p.stamp == t->last_stamp && t->last_target_id &&
	    t->last_target_id + KR_TARGET_ID_WINDOW > newest)
		return t->last_target_id;
	known = bpf_map_lookup_elem(&known_targets, &p.object);
	if (known && known->stamp == p.stamp && known->target_id + KR_TARGET_ID_WINDOW > newest) {
		fresh.target_id = known->target_id;
	} else {
		fresh.target_id = __sync_fetch_and_add(&last_target_id, 1) + 1;
		fresh.stamp = p.stamp;
		if (!send_target(&p, fresh.target_id))
			return 0;
		bpf_map_update_elem(&known_targets, &p.object, &fresh, BPF_ANY);
	}
	t->last_object = p.object;
	t->last_stamp = p.stamp;
	t->last_target_id = fresh.target_id;
	return fresh.target_id;
}

/* The first non-empty buffer of an iovec array and the total length. */
static __always_inline const void *first_iov(const struct iovec *iov, __u64 iovcnt, __u64 *first_len,
					     __u64 *total)
{
	const void *data = NULL;

	*total = 0;
	for (int i = 0; i < KR_MAX_IOVECS; i++) {
		struct iovec v;

		if (i >= iovcnt || bpf_probe_read_user(&v, sizeof(v), &iov[i]))
			break;
		if (!data && v.iov_len) {
			data = v.iov_base;
			*first_len = v.iov_len;
		}
		*total += v.iov_len;
	}
	return data;
}

/*
 * Sets the thread's context when a write or send starts with a marker or
 * an HTTP head. Seen for every process, whatever the capture filters:
 * they select events, and a context must be known before its events are.
 * Returns the thread's entry, t or the one made for the context.
 */
static __always_inline struct kr_thread *context_source(struct kr_thread *t, __u64 pid_tgid, const void *data,
							__u64 len)
{
	__u32 kind;

	if (!attribution_enabled || !data)
		return t;
	kind = context_kind(data, len);
	if (!kind)
		return t;
	if (!t)
		t = thread_entry((__u32)pid_tgid);
	if (t)
		open_context(t, kind, pid_tgid, data, len);
	return t;
}

/*
 * Whether a context program looks at the current task: every task but this
 * one, except that with --filter-transactions an excluded task is not looked
 * at at all (its events would be dropped with their context).
 */
static __always_inline bool context_watched(__u64 pid_tgid)
{
	if (pid_tgid >> 32 == self_tgid)
		return false;
	return !filter_transactions || current_wanted(pid_tgid >> 32);
}

/*
 * The filter verdict comes first, so that an excluded write costs its
 * lookups and, unless --filter-transactions, one look at its first bytes
 * (markers are seen everywhere) and whether its thread has a context.
 */
static __always_inline int write_enter(struct trace_event_raw_sys_enter *ctx, __u32 syscall, bool vectored)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	const void *data = (const void *)ctx->args[1];
	__u64 count = ctx->args[2];
	__u64 data_len = count;
	struct kr_thread *t = NULL;
	bool wanted = current_wanted(pid_tgid >> 32);
	__u32 tid = (__u32)pid_tgid;

	if (!wanted) {
		if (pid_tgid >> 32 == self_tgid || !attribution_enabled || filter_transactions)
			return 0;
		t = bpf_map_lookup_elem(&threads, &tid);
	} else {
		t = thread_entry(tid);
		if (!t)
			return 0;
	}
	if (vectored)
		data = first_iov(data, count, &data_len, &count);
	t = context_source(t, pid_tgid, data, data_len);
	if (!t)
		return 0;
	if (!wanted) {
		if (!t->context_id)
			return 0;
		syscall |= KR_EVENT_CONTEXT_ONLY;
	} else if (sample_background > 1) {
		if (t->context_id)
			syscall |= KR_EVENT_SAMPLE_IN_USER;
		else if (bpf_get_prandom_u32() % sample_background) {
			count_event(KR_COUNTER_SYS_WRITE_SAMPLED_OUT);
			return 0;
		}
	}
	t->fd = ctx->args[0];
	t->target_id = targets_enabled ? write_target(t, t->fd) : 0;
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
	e->write.target_id = t->target_id;
	submit(e, sizeof(*e));
	count_event(KR_COUNTER_SYS_WRITE_EMITTED);
	return 0;
}

#define WRITE_PROGRAMS(name, code, vectored)                                                                 \
	SEC("tracepoint/syscalls/sys_enter_" #name)                                                          \
	int sys_enter_##name(struct trace_event_raw_sys_enter *ctx)                                          \
	{                                                                                                    \
		return write_enter(ctx, code, vectored);                                                     \
	}                                                                                                    \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                                           \
	int sys_exit_##name(struct trace_event_raw_sys_exit *ctx)                                            \
	{                                                                                                    \
		return write_exit(ctx);                                                                      \
	}

WRITE_PROGRAMS(write, KR_SYS_WRITE, false)
WRITE_PROGRAMS(writev, KR_SYS_WRITEV, true)
WRITE_PROGRAMS(pwrite64, KR_SYS_PWRITE64, false)
WRITE_PROGRAMS(pwritev, KR_SYS_PWRITEV, true)
WRITE_PROGRAMS(pwritev2, KR_SYS_PWRITEV2, true)

/*
 * send(2) is sendto(2) in the kernel. The send family only sets context:
 * the events stay the write family's.
 */
SEC("tracepoint/syscalls/sys_enter_sendto")
int sys_enter_sendto(struct trace_event_raw_sys_enter *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();

	if (context_watched(pid_tgid))
		context_source(NULL, pid_tgid, (const void *)ctx->args[1], ctx->args[2]);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_sendmsg")
int sys_enter_sendmsg(struct trace_event_raw_sys_enter *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	const struct user_msghdr *msg = (const void *)ctx->args[1];
	struct user_msghdr m;
	const void *data;
	__u64 len = 0, total;

	if (!context_watched(pid_tgid) || bpf_probe_read_user(&m, sizeof(m), msg))
		return 0;
	data = first_iov(m.msg_iov, m.msg_iovlen, &len, &total);
	context_source(NULL, pid_tgid, data, len);
	return 0;
}

/*
 * Incoming requests: a read from a socket may bring an HTTP/1.x request
 * head. One program at syscall exit, nothing at enter: the call's
 * arguments are still in the task's saved registers. A failed or tiny
 * read stops at once, anything but a socket after a few direct loads, a
 * socket's data after its first 8 bytes unless they are a method token.
 */
static __always_inline int recv_exit(struct trace_event_raw_sys_exit *ctx, __u32 how)
{
	struct pt_regs *regs;
	struct file *file;
	const void *buf;
	__u64 len, got, pid_tgid, w = 0;
	struct kr_thread *t;

	if (ctx->ret < MIN_TOKEN_LEN || !bpf_rdonly_cast)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	file = current_file(PT_REGS_PARM1_SYSCALL(regs));
	if (!file || (file->f_inode->i_mode & KR_S_IFMT) != KR_S_IFSOCK)
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	if (!context_watched(pid_tgid))
		return 0;
	buf = (const void *)PT_REGS_PARM2_SYSCALL(regs);
	len = PT_REGS_PARM3_SYSCALL(regs);
	if (how != KR_RECV_BUF) {
		const struct iovec *iov = buf;
		struct iovec v;

		if (how == KR_RECV_MSG) {
			struct user_msghdr m;

			if (bpf_probe_read_user(&m, sizeof(m), buf))
				return 0;
			iov = m.msg_iov;
			len = m.msg_iovlen;
		}
		/* a head lands in the first buffer: readers put it there */
		if (!len || bpf_probe_read_user(&v, sizeof(v), iov))
			return 0;
		buf = v.iov_base;
		len = v.iov_len;
	}
	got = ctx->ret;
	if (got > len)
		got = len;
	if (got < MIN_TOKEN_LEN)
		return 0;
	/* the method token first: most socket data stops here */
	if (bpf_probe_read_user(&w, got < sizeof(w) ? MIN_TOKEN_LEN : sizeof(w), buf) || !is_http_request(w))
		return 0;
	t = thread_entry((__u32)pid_tgid);
	if (t)
		open_context(t, KR_CONTEXT_HTTP_REQUEST, pid_tgid, buf, got);
	return 0;
}

#define RECV_PROGRAM(name, how)                                                                              \
	SEC("tracepoint/syscalls/sys_exit_" #name)                                                           \
	int sys_exit_##name(struct trace_event_raw_sys_exit *ctx)                                            \
	{                                                                                                    \
		return recv_exit(ctx, how);                                                                  \
	}

RECV_PROGRAM(read, KR_RECV_BUF)
RECV_PROGRAM(readv, KR_RECV_IOV)
RECV_PROGRAM(recvfrom, KR_RECV_BUF)
RECV_PROGRAM(recvmsg, KR_RECV_MSG)

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

	bool wanted = current_wanted(pid_tgid >> 32);

	r.start_ns = bpf_ktime_get_boot_ns();
	r.pid = pid_tgid >> 32;
	r.tid = (__u32)pid_tgid;
	if (attribution_enabled && r.pid != self_tgid && (wanted || !filter_transactions)) {
		struct kr_thread *t = bpf_map_lookup_elem(&threads, &r.tid);

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
