/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Target resolution: what a call's fd refers to (a file's path, a socket's
 * peer, a pipe), sent once as a kr_target record and then named by id.
 */
#ifndef KREPLAY_CAPTURE_TARGETS_H
#define KREPLAY_CAPTURE_TARGETS_H

#include "../capture.h"
#include "maps.h"
#include "restarts.h"

/* Keyed by the dentry (files, devices, FIFOs), the sock, or a constant (pipes). */
struct kr_known_target {
	__u64 stamp;
	__u64 target_id;
};

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

/* What a call's fd refers to, and what tells when the cached description of it went stale. */
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

/*
 * TCP connections a listener accepted (SYN_RECV to ESTABLISHED, seen by
 * inet_sock_set_state), until they close: named by the address the service
 * listens on, which a test build of it shares, not by the client's port.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64); /* the sock */
	__type(value, __u8);
} accepted_socks SEC(".maps");

/*
 * The peer of an inet socket (the local address of an accepted one), or the
 * address of a unix one (its peer's if bound, else its own).
 */
static __always_inline __u32 read_peer(struct kr_target *rec, struct sock *sk)
{
	__u64 key = (__u64)sk;
	bool accepted;
	struct unix_address *ua;
	struct sock *peer;
	__u32 len;

	rec->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	rec->protocol = rec->family == KR_AF_UNIX ? BPF_CORE_READ_BITFIELD_PROBED(sk, sk_type)
						  : BPF_CORE_READ_BITFIELD_PROBED(sk, sk_protocol);
	accepted = (rec->family == KR_AF_INET || rec->family == KR_AF_INET6) &&
		   bpf_map_lookup_elem(&accepted_socks, &key);
	if (accepted)
		rec->flags |= KR_TARGET_ACCEPTED;
	if (rec->family == KR_AF_INET) {
		__u32 addr = accepted ? BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr)
				      : BPF_CORE_READ(sk, __sk_common.skc_daddr);

		__builtin_memcpy(rec->addr, &addr, sizeof(addr));
		rec->port = accepted ? BPF_CORE_READ(sk, __sk_common.skc_num)
				     : bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	} else if (rec->family == KR_AF_INET6) {
		if (accepted)
			bpf_core_read(rec->addr, sizeof(rec->addr), &sk->__sk_common.skc_v6_rcv_saddr);
		else
			bpf_core_read(rec->addr, sizeof(rec->addr), &sk->__sk_common.skc_v6_daddr);
		rec->port = accepted ? BPF_CORE_READ(sk, __sk_common.skc_num)
				     : bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
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

/* The scratch target record, its head set for target_id and p's kind; NULL only if the map failed. */
static __always_inline struct kr_target *target_head(struct kr_target_probe *p, __u64 target_id)
{
	__u32 zero = 0;
	struct kr_target *rec = bpf_map_lookup_elem(&target_scratch, &zero);

	if (!rec)
		return NULL;
	rec->type = KR_RECORD_TARGET;
	rec->target_id = target_id;
	rec->kind = p->kind;
	rec->flags = p->flags;
	rec->family = 0;
	rec->protocol = 0;
	rec->port = 0;
	__builtin_memset(rec->addr, 0, sizeof(rec->addr));
	return rec;
}

/* Puts rec, with len bytes of data, into the ring at its own length; false when the ring is full. */
static __always_inline bool output_target(struct kr_target *rec, __u32 len)
{
	__u64 size, unread;

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

/* Describes p's file or socket as a target record in the ring; false when the ring is full. */
static __always_inline bool send_target(struct kr_target_probe *p, __u64 target_id)
{
	struct kr_target *rec = target_head(p, target_id);
	/* a kernel type: BPF_CORE_READ on p->file would relocate kreplay's own struct */
	struct file *file = p->file;
	__u32 len = 0;

	if (!rec)
		return false;
	if (p->kind == KR_TARGET_SOCKET)
		len = read_peer(rec, p->sk);
	else if (!(p->flags & KR_TARGET_ANON_PIPE)) {
		len = read_path(rec, file);
		if (!BPF_CORE_READ(file, f_inode, i_nlink))
			rec->flags |= KR_TARGET_DELETED;
	}
	return output_target(rec, len);
}

/*
 * The target id of a call on fd when it is known: the thread's last one
 * when it uses the same object again, else the cached one; an id older than
 * KR_TARGET_ID_WINDOW is not. 0 when the fd is not open (p->file NULL) or
 * the target is new (p describes it). Leaves the sock of a socket in
 * t->sock (0 for the rest).
 */
static __always_inline __u64 known_target(struct kr_thread *t, __s32 fd, struct kr_target_probe *p)
{
	struct kr_known_target *known;
	struct file *file;
	__u64 newest;

	t->sock = 0;
	if (!bpf_rdonly_cast)
		return 0;
	file = current_file(fd);
	if (!file)
		return 0;
	probe_target(file, p);
	if (p->kind == KR_TARGET_SOCKET) {
		t->sock = p->object;
		t->sock_stamp = p->stamp;
	}
	newest = last_target_id;
	if (p->object == t->last_object && p->stamp == t->last_stamp && t->last_target_id &&
	    t->last_target_id + KR_TARGET_ID_WINDOW > newest)
		return t->last_target_id;
	known = bpf_map_lookup_elem(&known_targets, &p->object);
	if (!known || known->stamp != p->stamp || known->target_id + KR_TARGET_ID_WINDOW <= newest)
		return 0;
	t->last_object = p->object;
	t->last_stamp = p->stamp;
	t->last_target_id = known->target_id;
	return known->target_id;
}

/* A target record went into the ring: its id serves the next calls on its object. */
static __always_inline void remember_target(struct kr_thread *t, struct kr_target_probe *p, __u64 target_id)
{
	struct kr_known_target fresh = {.stamp = p->stamp, .target_id = target_id};

	bpf_map_update_elem(&known_targets, &p->object, &fresh, BPF_ANY);
	t->last_object = p->object;
	t->last_stamp = p->stamp;
	t->last_target_id = target_id;
}

static __always_inline __u64 new_target_id(void)
{
	return __sync_fetch_and_add(&last_target_id, 1) + 1;
}

/*
 * The target id of a call on fd, its record put into the ring now when it
 * is new. 0 when the fd is not open or the record was lost. For the
 * programs that cannot hand the work to resolve_target.
 */
static __always_inline __u64 call_target(struct kr_thread *t, __s32 fd)
{
	struct kr_target_probe p = {};
	__u64 id = known_target(t, fd, &p);

	if (id || !p.file)
		return id;
	id = new_target_id();
	if (!send_target(&p, id))
		return 0;
	remember_target(t, &p, id);
	return id;
}

/*
 * Describing a new target (its path walk above all) is the bulk of the
 * verifier's work: one program, resolve_target, does it for all the
 * syscall programs, which tail-call it last, once the call's state is kept.
 */
struct kr_pending_target {
	__u64 file;
	__u64 sk;
	__u64 object;
	__u64 stamp;
	__u64 target_id;
	__u32 kind;
	__u32 flags;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kr_pending_target);
} pending_target SEC(".maps");

/*
 * Like call_target, but a new target's id is handed out now and its record
 * left to resolve_target: *pending is set, and the caller must tail-call
 * resolve_targets last.
 */
static __always_inline __u64 call_target_deferred(struct kr_thread *t, __s32 fd, bool *pending)
{
	struct kr_target_probe p = {};
	struct kr_pending_target *out;
	__u32 zero = 0;
	__u64 id = known_target(t, fd, &p);

	if (id || !p.file)
		return id;
	out = bpf_map_lookup_elem(&pending_target, &zero);
	if (!out)
		return 0;
	out->file = (__u64)p.file;
	out->sk = (__u64)p.sk;
	out->object = p.object;
	out->stamp = p.stamp;
	out->kind = p.kind;
	out->flags = p.flags;
	out->target_id = new_target_id();
	*pending = true;
	return out->target_id;
}

SEC("tracepoint")
int resolve_target(void *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	/* a size, not a BTF type: the kernel takes no BTF for a prog array's key (libbpf would retry) */
	__uint(key_size, sizeof(__u32));
	__array(values, int(void *));
} resolve_targets SEC(".maps") = {
	.values = {[0] = (void *)&resolve_target},
};

/*
 * Tail-called by a syscall program's enter after call_target_deferred: the
 * record goes into the ring before the call's event can. The thread's call
 * starts when it is done, so the call's duration leaves this work out.
 */
SEC("tracepoint")
int resolve_target(void *ctx)
{
	__u32 zero = 0;
	struct kr_pending_target *pending = bpf_map_lookup_elem(&pending_target, &zero);
	struct kr_thread *t = current_thread();
	struct kr_target_probe p = {};

	if (!pending || !t)
		return 0;
	p.file = (struct file *)pending->file;
	p.sk = (struct sock *)pending->sk;
	p.object = pending->object;
	p.stamp = pending->stamp;
	p.kind = pending->kind;
	p.flags = pending->flags;
	if (send_target(&p, pending->target_id))
		remember_target(t, &p, pending->target_id);
	else if (t->target_id == pending->target_id)
		t->target_id = 0;
	call_start(t);
	return 0;
}

#endif /* KREPLAY_CAPTURE_TARGETS_H */
