/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * TLS plaintext: uprobes on OpenSSL's SSL_read/SSL_read_ex/SSL_write/
 * SSL_write_ex (libssl.so.3, or linked into a binary such as Node). The
 * plaintext goes through the same head sniffing as a socket's bytes
 * (heads.h), so a request head read over TLS sets the thread's context
 * exactly as a plaintext one does. The socket events themselves are the
 * syscalls' and keep the ciphertext byte counts. User space
 * (native/probes/tls_probes.cc) attaches these to each binary that holds the
 * symbols.
 */
#ifndef KREPLAY_CAPTURE_TLS_H
#define KREPLAY_CAPTURE_TLS_H

#include "maps.h"
#include "units.h"
#include "heads.h"

/* An SSL_read in flight: where its plaintext lands. */
struct kr_tls_read {
	__u64 ssl; /* the connection */
	__u64 buf;
	__u64 readbytes; /* SSL_read_ex: the size_t its count goes to; 0 for SSL_read */
	__u64 held; /* the context suspended during the call (see tls_read_enter), 0: none */
	/* the socket a read inside the call used (reads.h), and its stamp: the connection the head came on */
	__u64 sock;
	__u64 stamp;
};

/*
 * By thread id: SSL_read does not nest, a thread is in one at a time. LRU:
 * a thread that exits inside a call leaves its entry to be evicted.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct kr_tls_read);
} tls_reads SEC(".maps");

/*
 * A server thread's socket reads inside SSL_read may bring the next
 * request's head, which is seen only when the call returns: its context is
 * suspended for the call, so those reads are unattributed rather than the
 * previous request's, and given back at return unless a new head came.
 * Only for a thread whose context a TLS head of this connection set: a
 * client reading its response keeps its context.
 */
static __always_inline void tls_read_enter(const void *ssl, const void *buf, const void *readbytes)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct kr_tls_read r = {(__u64)ssl, (__u64)buf, (__u64)readbytes};
	__u64 *owner;
	struct kr_thread *t;

	if (!attribution_enabled || !context_watched(pid_tgid))
		return;
	owner = bpf_map_lookup_elem(&head_threads, &tid);
	t = owner && *owner == (__u64)ssl ? current_thread() : NULL;
	if (t) {
		r.held = t->context_id;
		t->context_id = 0;
	}
	bpf_map_update_elem(&tls_reads, &tid, &r, BPF_ANY);
	/* the read programs look at this thread's reads now, to learn the connection's socket */
	mark_context_thread(tid);
}

/* A socket read inside SSL_read: the TLS connection is on that socket. */
static __always_inline void tls_read_socket(__u32 tid, struct kr_thread *t)
{
	struct kr_tls_read *r = bpf_map_lookup_elem(&tls_reads, &tid);

	if (r && t->sock) {
		r->sock = t->sock;
		r->stamp = t->sock_stamp;
	}
}

/* ret: SSL_read's byte count, or SSL_read_ex's 1 (success) with the count in *readbytes */
static __always_inline void tls_read_exit(__s64 ret, bool ex)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	struct kr_tls_read *r = bpf_map_lookup_elem(&tls_reads, &tid);
	const void *buf;
	__u64 got = 0, w = 0, ssl, sock, stamp;
	struct kr_thread *t;

	if (!r)
		return;
	buf = (const void *)r->buf;
	ssl = r->ssl;
	sock = r->sock;
	stamp = r->stamp;
	if (!ex)
		got = ret > 0 ? ret : 0;
	else if (ret == 1 && r->readbytes)
		bpf_probe_read_user(&got, sizeof(got), (const void *)r->readbytes);
	t = current_thread();
	if (t && r->held && !t->context_id)
		t->context_id = r->held;
	/* the mark tls_read_enter set, where nothing else wants the thread's reads */
	if (!t || (!t->context_id && !t->unit_kind))
		forget_thread_context(tid);
	bpf_map_delete_elem(&tls_reads, &tid);
	if (got < MIN_TOKEN_LEN || bpf_probe_read_user(&w, got < sizeof(w) ? MIN_TOKEN_LEN : sizeof(w), buf))
		return;
	if (got >= sizeof(w) && is_h2_preface(w))
		head_read(pid_tgid, ssl, sock, stamp, KR_CONN_TLS | KR_CONN_MULTIPLEXED, 0, 0, buf, got);
	else if (is_http_request(w))
		head_read(pid_tgid, ssl, sock, stamp, KR_CONN_TLS, 0, 0, buf, got);
}

SEC("uprobe")
int BPF_KPROBE(ssl_read_enter, void *ssl, void *buf, int num)
{
	tls_read_enter(ssl, buf, NULL);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ssl_read_exit, int ret)
{
	tls_read_exit(ret, false);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(ssl_read_ex_enter, void *ssl, void *buf, __u64 num, __u64 *readbytes)
{
	tls_read_enter(ssl, buf, readbytes);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(ssl_read_ex_exit, int ret)
{
	tls_read_exit(ret, true);
	return 0;
}

/* A write's plaintext is known at entry: a head or a marker sets the context as a plaintext write does. */
static __always_inline void tls_write(const void *buf, __u64 len)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct kr_thread *t;

	if (!context_watched(pid_tgid))
		return;
	t = current_thread();
	if (t)
		unit_refresh(t, pid_tgid);
	context_source(t, pid_tgid, -1, buf, len, NULL);
}

SEC("uprobe")
int BPF_KPROBE(ssl_write_enter, void *ssl, const void *buf, int num)
{
	if (num > 0)
		tls_write(buf, num);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(ssl_write_ex_enter, void *ssl, const void *buf, __u64 num)
{
	tls_write(buf, num);
	return 0;
}

#endif /* KREPLAY_CAPTURE_TLS_H */
