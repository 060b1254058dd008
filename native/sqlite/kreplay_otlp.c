/*
 * The agent's OTLP export, inside SQLite (agent/otlp/otlp-native-spans.ts owns the SQL), so that
 * neither a row nor a span's bytes cross into JavaScript:
 *
 * kreplay_otlp_spans(spec, held, seq, ts, dur, service, ctx, trace_id, parent_span_id, trace_flags,
 * transaction_id, type, pid, tid, comm, bytes, syscall, fd, ret, target_kind, target, response_ns,
 * request_key, dev, sector, op, error): an aggregate that writes each row of a W3C trace as an
 * OTLP Span message (opentelemetry/proto/trace/v1/trace.proto, as ScopeSpans field 2) into the
 * connection's open request, per service. The span is the one core/otlp/event-span.ts makes of
 * the row's API event (eventSpan, for OTLP/JSON and export files) as core/otlp/span-protobuf.ts
 * writes it, byte for byte (test/integration/otlp-native-spans.test.ts compares them for events of
 * every kind). kreplay_otlp_undo() takes the last read's spans back out (the trace cap folded some
 * of its rows; the queue was full). kreplay_otlp_request(layout, level) returns the open request
 * framed as the TS side lays it out, gzipped by libdeflate, and empties it.
 *
 * spec: what the row's codes are named and where the rows come from, made by the TS side from its
 * own name functions, one item a line, fields split by tabs: `store` and the store id (12 hex
 * digits), `sampling` and `sampled` or `all`, then `type`, `syscall`, `kind`, `op` and `errno`,
 * each with the names of codes 0..255. held: the seqs to leave out (doubles, ascending; the trace
 * cap folded them into a summary).
 *
 * A row whose span this encoder cannot be sure to write as the TS side would (a code past the
 * tables, text that is not valid UTF-8, an integer past 2^53 where JavaScript rounds, a parent
 * span id that is not 16 hex digits, a missing comm) is not written but listed, for the TS side to
 * make; a row whose trace id is not a W3C one (32 lower-case hex digits, not all zero) is skipped,
 * as eventSpan skips it.
 *
 * kreplay_otlp_spans's result (a blob; numbers as little-endian doubles): the number of services
 * the read added spans for, per service its id, the spans and their bytes; then the number of
 * contexts, per context its id, the rows written as spans and the rows of unsampled traces
 * skipped, then its trace id (32 hex digits, not a double: the TS side counts the cap by trace
 * without a query a context); then the number of rows left to the TS side, per row its seq and context id.
 */
#include <libdeflate.h>
#include <stdint.h>
#include <string.h>

#include "kreplay_event_id.h"
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT3

enum {
  A_SPEC,
  A_HELD,
  A_SEQ,
  A_TS,
  A_DUR,
  A_SERVICE,
  A_CTX,
  A_TRACE,
  A_PARENT,
  A_FLAGS,
  A_TXN,
  A_TYPE,
  A_PID,
  A_TID,
  A_COMM,
  A_BYTES,
  A_SYSCALL,
  A_FD,
  A_RET,
  A_KIND,
  A_TARGET,
  A_RESPONSE,
  A_REQUEST_KEY,
  A_DEV,
  A_SECTOR,
  A_OP,
  A_ERROR,
  N_ARGS
};

/* the encoder's helpers, run a dozen times a span: inlined, a read costs a sixth less (perf, bench/otlp.ts) */
#define HOT static inline __attribute__((always_inline))

#define CODES 256
#define STORE_ID_LEN 12
/* Number.MAX_SAFE_INTEGER: past it JavaScript's Number() rounds */
#define MAX_SAFE ((int64_t)9007199254740991LL)

enum { T_TYPE, T_SYSCALL, T_KIND, T_OP, T_ERRNO, N_TABLES };
static const char *const kTableNames[N_TABLES] = {"type", "syscall", "kind", "op", "errno"};

typedef struct {
  const unsigned char *s;
  int n;
} Str;

typedef struct {
  /* the spec's text, which the names point into */
  char *text;
  int len;
  char storeId[STORE_ID_LEN];
  uint32_t storeHi, storeLo;
  int sampledOnly;
  Str names[N_TABLES][CODES];
  /* by code: the span's shape eventSpan gives the type's name (block_io, sys_read, sys_write) and the kind's */
  unsigned char isBlock[CODES], isRead[CODES], isWrite[CODES], isFile[CODES], isSocket[CODES];
} Spec;

/* A service's spans written since the last request, and how far they went before the last read. */
typedef struct {
  int64_t service;
  unsigned char *data;
  int64_t len, cap;
  int64_t spans;
  int64_t markLen, markSpans;
  /* named by the layout being read */
  int named;
} Group;

/* Groups kept between requests at most (their buffers are reused) */
#define MAX_KEPT_GROUPS 64

/* What a connection keeps between statements: the last spec, parsed; the open request's spans; the gzip compressor. */
typedef struct {
  Spec *spec;
  Group *groups;
  int nGroups, capGroups, lastGroup;
  struct libdeflate_compressor *gzip;
  int gzipLevel;
  /* a request's bytes, and gzipped: kept (a fresh buffer of megabytes costs its page faults each time) */
  unsigned char *raw, *packed;
  int64_t rawCap, packedCap;
} Conn;

/* `*buf` holds `size` bytes at least; 0 when memory ran out. */
static int reserveScratch(unsigned char **buf, int64_t *cap, int64_t size) {
  if (size <= *cap) return 1;
  unsigned char *bigger = sqlite3_realloc64(*buf, (sqlite3_uint64)size);
  if (bigger == NULL) return 0;
  *buf = bigger;
  *cap = size;
  return 1;
}

#define TRACE_ID_LEN 32

typedef struct {
  int64_t ctx;
  int64_t spans, unsampled;
  int used;
  /* the context's W3C trace id: the TS side counts the trace cap by it without looking the context up */
  unsigned char trace[TRACE_ID_LEN];
} CtxCount;

typedef struct {
  int started, failed;
  const Spec *spec;
  Conn *conn;
  double *held;
  int64_t nHeld;
  CtxCount *ctxs;
  int64_t ctxCap, ctxUsed;
  double *left; /* seq, ctx pairs */
  int64_t nLeft, capLeft;
} Agg;

static int strIs(Str s, const char *text) { return s.n == (int)strlen(text) && memcmp(s.s, text, (size_t)s.n) == 0; }

HOT int hexValue(int c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

static void freeSpec(Spec *spec) {
  if (spec == NULL) return;
  sqlite3_free(spec->text);
  sqlite3_free(spec);
}

/* The spec of `text`, or NULL with *error set. */
static Spec *parseSpec(const char *text, int len, char **error) {
  Spec *spec = sqlite3_malloc(sizeof *spec);
  if (spec == NULL) return NULL;
  memset(spec, 0, sizeof *spec);
  spec->text = sqlite3_malloc(len + 1);
  if (spec->text == NULL) {
    sqlite3_free(spec);
    return NULL;
  }
  memcpy(spec->text, text, (size_t)len);
  spec->text[len] = '\n';
  spec->len = len;
  int seen = 0;
  for (char *line = spec->text; line < spec->text + len;) {
    char *end = memchr(line, '\n', (size_t)(spec->text + len + 1 - line));
    char *tab = memchr(line, '\t', (size_t)(end - line));
    const int keyLen = (int)((tab ? tab : end) - line);
    Str key = {(const unsigned char *)line, keyLen};
    char *value = tab ? tab + 1 : end;
    const int valueLen = (int)(end - value);
    if (strIs(key, "store")) {
      int ok = valueLen == STORE_ID_LEN;
      for (int i = 0; ok && i < STORE_ID_LEN; i++) ok = hexValue(value[i]) >= 0;
      if (!ok) {
        *error =
            sqlite3_mprintf("kreplay_otlp_spans: the store id %.*Q is not 12 lower-case hex digits", valueLen, value);
        goto fail;
      }
      memcpy(spec->storeId, value, STORE_ID_LEN);
      for (int i = 0; i < 8; i++) spec->storeHi = spec->storeHi << 4 | (uint32_t)hexValue(value[i]);
      for (int i = 8; i < STORE_ID_LEN; i++) spec->storeLo = spec->storeLo << 4 | (uint32_t)hexValue(value[i]);
      seen |= 1 << N_TABLES;
    } else if (strIs(key, "sampling")) {
      Str v = {(const unsigned char *)value, valueLen};
      if (!strIs(v, "sampled") && !strIs(v, "all")) {
        *error = sqlite3_mprintf("kreplay_otlp_spans: sampling %.*Q is neither sampled nor all", valueLen, value);
        goto fail;
      }
      spec->sampledOnly = strIs(v, "sampled");
      seen |= 1 << (N_TABLES + 1);
    } else {
      int t = 0;
      while (t < N_TABLES && !strIs(key, kTableNames[t])) t++;
      if (t == N_TABLES) {
        *error = sqlite3_mprintf("kreplay_otlp_spans: unknown spec line %.*Q", keyLen, line);
        goto fail;
      }
      int code = 0;
      for (char *name = value; name <= end && code < CODES; code++) {
        char *stop = memchr(name, '\t', (size_t)(end - name));
        if (stop == NULL) stop = end;
        spec->names[t][code] = (Str){(const unsigned char *)name, (int)(stop - name)};
        name = stop + 1;
        if (stop == end) {
          code++;
          break;
        }
      }
      if (code != CODES || memchr(spec->names[t][CODES - 1].s, '\t', (size_t)spec->names[t][CODES - 1].n)) {
        *error =
            sqlite3_mprintf("kreplay_otlp_spans: the %s table must name the codes 0..%d", kTableNames[t], CODES - 1);
        goto fail;
      }
      seen |= 1 << t;
    }
    line = end + 1;
  }
  if (seen != (1 << (N_TABLES + 2)) - 1) {
    *error = sqlite3_mprintf("kreplay_otlp_spans: the spec lacks a line (store, sampling and the %d tables)", N_TABLES);
    goto fail;
  }
  for (int c = 0; c < CODES; c++) {
    spec->isBlock[c] = strIs(spec->names[T_TYPE][c], "block_io");
    spec->isRead[c] = strIs(spec->names[T_TYPE][c], "sys_read");
    spec->isWrite[c] = strIs(spec->names[T_TYPE][c], "sys_write");
    spec->isFile[c] = strIs(spec->names[T_KIND][c], "file");
    spec->isSocket[c] = strIs(spec->names[T_KIND][c], "socket");
  }
  return spec;
fail:
  freeSpec(spec);
  return NULL;
}

/* ---- the span's bytes ---- */

typedef struct {
  unsigned char *p;
} Out;

HOT int varintSize(uint64_t v) {
  int n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}

HOT void putVarint(Out *o, uint64_t v) {
  while (v >= 0x80) {
    *o->p++ = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  *o->p++ = (unsigned char)v;
}

HOT void putBytes(Out *o, const void *b, int n) {
  memcpy(o->p, b, (size_t)n);
  o->p += n;
}

HOT void putFixed64(Out *o, uint64_t v) {
  for (int i = 0; i < 8; i++) *o->p++ = (unsigned char)(v >> (8 * i));
}

/* A field of bytes: tag, length, bytes. */
HOT void putLenField(Out *o, int tag, const void *b, int n) {
  *o->p++ = (unsigned char)tag;
  putVarint(o, (uint64_t)n);
  putBytes(o, b, n);
}

/* KeyValue{1 key, 2 AnyValue} as Span field 9 (attributes). */
HOT void attrString(Out *o, const char *key, int keyLen, const void *value, int n) {
  const int any = 1 + varintSize((uint64_t)n) + n;
  *o->p++ = 0x4a;
  putVarint(o, (uint64_t)(2 + keyLen + 1 + varintSize((uint64_t)any) + any));
  putLenField(o, 0x0a, key, keyLen);
  *o->p++ = 0x12;
  putVarint(o, (uint64_t)any);
  putLenField(o, 0x0a, value, n);
}

/* An integer attribute, as the TS writer writes a Number: an int64 when safe, else the double it rounds to. */
HOT void attrInt(Out *o, const char *key, int keyLen, int64_t v) {
  if (v > MAX_SAFE || v < -MAX_SAFE) {
    const double d = (double)v;
    uint64_t bits;
    memcpy(&bits, &d, 8);
    *o->p++ = 0x4a;
    putVarint(o, (uint64_t)(2 + keyLen + 2 + 9));
    putLenField(o, 0x0a, key, keyLen);
    *o->p++ = 0x12;
    *o->p++ = 9;
    *o->p++ = 0x21;
    putFixed64(o, bits);
    return;
  }
  const int any = 1 + varintSize((uint64_t)v);
  *o->p++ = 0x4a;
  putVarint(o, (uint64_t)(2 + keyLen + 2 + any));
  putLenField(o, 0x0a, key, keyLen);
  *o->p++ = 0x12;
  *o->p++ = (unsigned char)any;
  *o->p++ = 0x18;
  putVarint(o, (uint64_t)v);
}

HOT void attrTrue(Out *o, const char *key, int keyLen) {
  *o->p++ = 0x4a;
  putVarint(o, (uint64_t)(2 + keyLen + 4));
  putLenField(o, 0x0a, key, keyLen);
  *o->p++ = 0x12;
  *o->p++ = 2;
  *o->p++ = 0x10;
  *o->p++ = 1;
}

/* the attributes of a key given as a literal, its length counted by the compiler */
#define ATTR_STRING(o, key, value, n) attrString(o, key, (int)sizeof(key) - 1, value, n)
#define ATTR_INT(o, key, v) attrInt(o, key, (int)sizeof(key) - 1, v)
#define ATTR_TRUE(o, key) attrTrue(o, key, (int)sizeof(key) - 1)

/* ---- what a row holds, checked ---- */

/* Whether the bytes are UTF-8 (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF). */
HOT int isUtf8(const unsigned char *s, int n) {
  int i = 0;
  /* ASCII, nearly all of it: eight bytes at a time */
  for (uint64_t word; i + 8 <= n; i += 8) {
    memcpy(&word, s + i, 8);
    if (word & 0x8080808080808080ull) break;
  }
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    int more;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
      more = 1;
    else if (c >= 0xe0 && c <= 0xef) {
      more = 2;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      more = 3;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else
      return 0;
    if (i + more >= n) return 0;
    if (s[i + 1] < lo || s[i + 1] > hi) return 0;
    for (int k = 2; k <= more; k++)
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) return 0;
    i += more + 1;
  }
  return 1;
}

/* A text value (Str with s == NULL for SQL NULL); 0 when it is another type or not UTF-8. */
HOT int textOf(sqlite3_value *v, Str *out) {
  const int type = sqlite3_value_type(v);
  if (type == SQLITE_NULL) {
    *out = (Str){NULL, 0};
    return 1;
  }
  if (type != SQLITE_TEXT) return 0;
  out->s = sqlite3_value_text(v);
  out->n = sqlite3_value_bytes(v);
  return out->s != NULL && isUtf8(out->s, out->n);
}

/* An integer value (`fallback` for NULL) that JavaScript's Number() holds exactly; 0 if not. */
HOT int intOf(sqlite3_value *v, int64_t fallback, int64_t *out) {
  const int type = sqlite3_value_type(v);
  if (type == SQLITE_NULL) {
    *out = fallback;
    return 1;
  }
  if (type != SQLITE_INTEGER) return 0;
  *out = sqlite3_value_int64(v);
  return 1;
}

/* A code's index in the tables, or -1 past them. */
static int codeOf(int64_t code) { return code >= 0 && code < CODES ? (int)code : -1; }

/* core/otlp/span-ids.ts spanIdFor: two odd multiplications of the seq, the store id mixed in. */
static void spanIdFor(const Spec *spec, uint64_t seq, unsigned char id[8]) {
  const uint32_t lo = (uint32_t)seq * 0x9e3779b1u;
  const uint32_t hi = (uint32_t)(seq >> 32) + lo * 0x85ebca6bu;
  const uint32_t a = hi ^ spec->storeHi, b = lo ^ (spec->storeLo * 0xc2b2ae35u);
  for (int i = 0; i < 4; i++) id[i] = (unsigned char)(a >> (24 - 8 * i));
  for (int i = 0; i < 4; i++) id[4 + i] = (unsigned char)(b >> (24 - 8 * i));
  if (a == 0 && b == 0) id[7] = 1;
}

static int isW3cTraceId(Str t) {
  if (t.s == NULL || t.n != 32) return 0;
  int nonZero = 0;
  for (int i = 0; i < 32; i++) {
    if (hexValue(t.s[i]) < 0) return 0;
    nonZero |= t.s[i] != '0';
  }
  return nonZero;
}

HOT void hexBytes(const unsigned char *hex, int bytes, unsigned char *out) {
  for (int i = 0; i < bytes; i++) out[i] = (unsigned char)(hexValue(hex[2 * i]) << 4 | hexValue(hex[2 * i + 1]));
}

/*
 * event-span.ts's SOCKET pattern, /^(tcp|udp|sctp|mptcp|udplite)( accepted)?
 * (?:\[([0-9a-f:.]+)\]|(\d+\.\d+\.\d+\.\d+)):(\d+)$/, by hand: 1 and the parts when it matches.
 */
typedef struct {
  Str transport, address;
  int accepted, v6;
  int64_t port;
} Socket;

static int digitsAt(const unsigned char *s, int n, int i) {
  int k = i;
  while (k < n && s[k] >= '0' && s[k] <= '9') k++;
  return k - i;
}

static int parseSocket(Str t, Socket *out) {
  static const char *const kTransports[] = {"tcp", "udp", "sctp", "mptcp", "udplite"};
  const unsigned char *s = t.s;
  const int n = t.n;
  int i = -1;
  for (int k = 0; k < 5; k++) {
    const int len = (int)strlen(kTransports[k]);
    if (n > len && memcmp(s, kTransports[k], (size_t)len) == 0 && s[len] == ' ') {
      out->transport = (Str){s, len};
      i = len + 1;
      break;
    }
  }
  if (i < 0) return 0;
  out->accepted = n - i > 9 && memcmp(s + i, "accepted ", 9) == 0;
  if (out->accepted) i += 9;
  if (i < n && s[i] == '[') {
    int k = i + 1;
    while (k < n && (hexValue(s[k]) >= 0 || s[k] == ':' || s[k] == '.')) k++;
    if (k == i + 1 || k >= n || s[k] != ']') return 0;
    out->address = (Str){s + i + 1, k - i - 1};
    out->v6 = 1;
    i = k + 1;
  } else {
    const int from = i;
    for (int part = 0; part < 4; part++) {
      const int d = digitsAt(s, n, i);
      if (d == 0) return 0;
      i += d;
      if (part < 3) {
        if (i >= n || s[i] != '.') return 0;
        i++;
      }
    }
    out->address = (Str){s + from, i - from};
    out->v6 = 0;
  }
  if (i >= n || s[i] != ':') return 0;
  i++;
  const int d = digitsAt(s, n, i);
  if (d == 0 || i + d != n) return 0;
  /* more digits than a safe integer holds for sure: the TS side makes the span */
  if (d > 15) return -1;
  out->port = 0;
  for (int k = i; k < n; k++) out->port = out->port * 10 + (s[k] - '0');
  return 1;
}

/* ---- the aggregate's state ---- */

static int reserveGroup(Group *g, int64_t more) {
  if (g->len + more <= g->cap) return 1;
  int64_t cap = g->cap ? g->cap : 1 << 16;
  while (cap < g->len + more) cap *= 2;
  unsigned char *data = sqlite3_realloc64(g->data, (sqlite3_uint64)cap);
  if (data == NULL) return 0;
  g->data = data;
  g->cap = cap;
  return 1;
}

static Group *groupOf(Conn *c, int64_t service) {
  if (c->nGroups > 0 && c->groups[c->lastGroup].service == service) return &c->groups[c->lastGroup];
  for (int i = 0; i < c->nGroups; i++)
    if (c->groups[i].service == service) {
      c->lastGroup = i;
      return &c->groups[i];
    }
  if (c->nGroups == c->capGroups) {
    const int cap = c->capGroups ? c->capGroups * 2 : 8;
    Group *groups = sqlite3_realloc64(c->groups, (sqlite3_uint64)cap * sizeof *groups);
    if (groups == NULL) return NULL;
    c->groups = groups;
    c->capGroups = cap;
  }
  Group *g = &c->groups[c->nGroups];
  memset(g, 0, sizeof *g);
  g->service = service;
  c->lastGroup = c->nGroups++;
  return g;
}

/* The open request's spans as they were before the last read (kreplay_otlp_undo, a failed read). */
static void undo(Conn *c) {
  for (int i = 0; i < c->nGroups; i++) {
    c->groups[i].len = c->groups[i].markLen;
    c->groups[i].spans = c->groups[i].markSpans;
  }
}

/* No open request: the spans went into one (or were undone); the buffers stay for the next. */
static void clearGroups(Conn *c) {
  if (c->nGroups > MAX_KEPT_GROUPS) {
    for (int i = 0; i < c->nGroups; i++) sqlite3_free(c->groups[i].data);
    c->nGroups = 0;
  }
  for (int i = 0; i < c->nGroups; i++)
    c->groups[i].len = c->groups[i].spans = c->groups[i].markLen = c->groups[i].markSpans = 0;
}

/* The context's counts, made with its trace id (a W3C one) at its first row. */
static CtxCount *ctxCountOf(Agg *a, int64_t ctx, Str trace) {
  if (a->ctxUsed * 2 >= a->ctxCap) {
    const int64_t cap = a->ctxCap ? a->ctxCap * 2 : 256;
    CtxCount *table = sqlite3_malloc64((sqlite3_uint64)cap * sizeof *table);
    if (table == NULL) return NULL;
    memset(table, 0, (size_t)cap * sizeof *table);
    for (int64_t i = 0; i < a->ctxCap; i++) {
      if (!a->ctxs[i].used) continue;
      uint64_t h = (uint64_t)a->ctxs[i].ctx * 0x9e3779b97f4a7c15ull;
      while (table[h & (uint64_t)(cap - 1)].used) h++;
      table[h & (uint64_t)(cap - 1)] = a->ctxs[i];
    }
    sqlite3_free(a->ctxs);
    a->ctxs = table;
    a->ctxCap = cap;
  }
  uint64_t h = (uint64_t)ctx * 0x9e3779b97f4a7c15ull;
  for (;; h++) {
    CtxCount *c = &a->ctxs[h & (uint64_t)(a->ctxCap - 1)];
    if (!c->used) {
      c->used = 1;
      c->ctx = ctx;
      memcpy(c->trace, trace.s, TRACE_ID_LEN);
      a->ctxUsed++;
      return c;
    }
    if (c->ctx == ctx) return c;
  }
}

static int leaveToTs(Agg *a, int64_t seq, int64_t ctx) {
  if (a->nLeft == a->capLeft) {
    const int64_t cap = a->capLeft ? a->capLeft * 2 : 16;
    double *left = sqlite3_realloc64(a->left, (sqlite3_uint64)cap * 2 * sizeof *left);
    if (left == NULL) return 0;
    a->left = left;
    a->capLeft = cap;
  }
  a->left[2 * a->nLeft] = (double)seq;
  a->left[2 * a->nLeft + 1] = (double)ctx;
  a->nLeft++;
  return 1;
}

static int isHeld(const Agg *a, int64_t seq) {
  int64_t lo = 0, hi = a->nHeld;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (a->held[mid] < (double)seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < a->nHeld && a->held[lo] == (double)seq;
}

static int start(sqlite3_context *ctx, Agg *a, int argc, sqlite3_value **argv) {
  if (argc != N_ARGS) {
    sqlite3_result_error(ctx, "kreplay_otlp_spans: wrong number of arguments", -1);
    return 0;
  }
  Conn *cache = sqlite3_user_data(ctx);
  const char *text = (const char *)sqlite3_value_text(argv[A_SPEC]);
  const int len = sqlite3_value_bytes(argv[A_SPEC]);
  if (text == NULL) {
    sqlite3_result_error(ctx, "kreplay_otlp_spans: no spec", -1);
    return 0;
  }
  if (cache->spec == NULL || cache->spec->len != len || memcmp(cache->spec->text, text, (size_t)len) != 0) {
    char *error = NULL;
    Spec *spec = parseSpec(text, len, &error);
    if (spec == NULL) {
      if (error == NULL)
        sqlite3_result_error_nomem(ctx);
      else
        sqlite3_result_error(ctx, error, -1);
      sqlite3_free(error);
      return 0;
    }
    freeSpec(cache->spec);
    cache->spec = spec;
  }
  a->spec = cache->spec;
  a->conn = cache;
  for (int i = 0; i < cache->nGroups; i++) {
    cache->groups[i].markLen = cache->groups[i].len;
    cache->groups[i].markSpans = cache->groups[i].spans;
  }
  const int heldBytes = sqlite3_value_bytes(argv[A_HELD]);
  if (heldBytes % 8 != 0) {
    sqlite3_result_error(ctx, "kreplay_otlp_spans: held must be doubles", -1);
    return 0;
  }
  if (heldBytes > 0) {
    a->held = sqlite3_malloc(heldBytes);
    if (a->held == NULL) {
      sqlite3_result_error_nomem(ctx);
      return 0;
    }
    memcpy(a->held, sqlite3_value_blob(argv[A_HELD]), (size_t)heldBytes);
    a->nHeld = heldBytes / 8;
  }
  a->started = 1;
  return 1;
}

/* ---- a row ---- */

#define ERROR_NAME_NONE (-1)

/*
 * The row's span into its service's group (1), or 0 when the TS side must make it, or -1 when
 * memory ran out. Mirrors core/otlp/event-span.ts eventSpan and span-protobuf.ts writeSpan.
 */
static int writeSpan(Agg *a, sqlite3_value **argv, int64_t seq, Str trace, int64_t flags) {
  const Spec *spec = a->spec;
  int64_t ts, dur, service, type, pid, tid, bytes;
  Str parent, txn, comm;
  if (!intOf(argv[A_TS], -1, &ts) || !intOf(argv[A_DUR], -1, &dur) || !intOf(argv[A_SERVICE], -1, &service) ||
      !intOf(argv[A_TYPE], -1, &type) || !intOf(argv[A_PID], 0, &pid) || !intOf(argv[A_TID], 0, &tid) ||
      !intOf(argv[A_BYTES], 0, &bytes))
    return 0;
  /* the times as fixed64 (the TS writer throws past them); the event id's 12 digits of seq */
  if (seq < 0 || ts < 0 || dur < 0 || (uint64_t)ts + (uint64_t)dur < (uint64_t)ts || seq >= (int64_t)1 << 48) return 0;
  if (!textOf(argv[A_PARENT], &parent) || !textOf(argv[A_TXN], &txn) || !textOf(argv[A_COMM], &comm) || comm.s == NULL)
    return 0;
  if (parent.s != NULL) {
    if (parent.n != 16) return 0;
    for (int i = 0; i < 16; i++)
      if (hexValue(parent.s[i]) < 0) return 0;
  }
  const int typeCode = codeOf(type);
  if (typeCode < 0) return 0;
  const int block = spec->isBlock[typeCode];

  /* the type's own values */
  int64_t syscall = 0, fd = -1, ret = 0, kind = 0, response = 0, requestKey = 0, dev = 0, sector = 0, op = 0, error = 0;
  Str target = {NULL, 0};
  int hasResponse = 0, hasRequestKey = 0, errorCode = ERROR_NAME_NONE;
  char device[48];
  int deviceLen = 0;
  Socket socket = {{NULL, 0}, {NULL, 0}, 0, 0, 0};
  int socketMatch = 0, unixSocket = 0;
  if (block) {
    if (!intOf(argv[A_DEV], 0, &dev) || !intOf(argv[A_SECTOR], 0, &sector) || !intOf(argv[A_OP], 0, &op) ||
        !intOf(argv[A_ERROR], 0, &error))
      return 0;
    if (dev < 0 || dev > MAX_SAFE || codeOf(op) < 0) return 0;
    /* core/model/event-types.ts deviceName: MKDEV's major:minor */
    sqlite3_snprintf(sizeof device, device, "%lld:%lld", (long long)(dev >> 20), (long long)(dev & 0xfffff));
    deviceLen = (int)strlen(device);
    if (error < 0) {
      if (error < -(CODES - 1)) return 0;
      errorCode = (int)-error;
    }
  } else {
    if (!intOf(argv[A_SYSCALL], 0, &syscall) || !intOf(argv[A_FD], -1, &fd) || !intOf(argv[A_RET], 0, &ret) ||
        !intOf(argv[A_KIND], 0, &kind) || !textOf(argv[A_TARGET], &target))
      return 0;
    if (codeOf(syscall) < 0 || codeOf(kind) < 0) return 0;
    if (spec->isRead[typeCode] && sqlite3_value_type(argv[A_RESPONSE]) != SQLITE_NULL) {
      if (!intOf(argv[A_RESPONSE], 0, &response)) return 0;
      hasResponse = 1;
    }
    if (spec->isWrite[typeCode] && sqlite3_value_type(argv[A_REQUEST_KEY]) != SQLITE_NULL) {
      if (!intOf(argv[A_REQUEST_KEY], 0, &requestKey)) return 0;
      hasRequestKey = 1;
    }
    if (target.s != NULL && spec->isSocket[kind]) {
      socketMatch = parseSocket(target, &socket);
      if (socketMatch < 0) return 0;
      unixSocket = !socketMatch && target.n >= 5 && memcmp(target.s, "unix ", 5) == 0;
    }
    if (ret < 0) {
      if (ret < -(CODES - 1)) return 0;
      errorCode = (int)-ret;
    }
  }
  const Str typeName = spec->names[T_TYPE][typeCode];
  const Str errorName = errorCode == ERROR_NAME_NONE ? (Str){NULL, 0} : spec->names[T_ERRNO][errorCode];
  const Str opName = block ? spec->names[T_OP][op] : (Str){NULL, 0};

  /* room: the fixed fields and keys take under 1 KB; the texts at most three times each (name, target, path) */
  const int64_t room = 1024 + typeName.n + 3 * (int64_t)target.n + comm.n + txn.n + errorName.n * 2 + opName.n * 2 +
                       deviceLen * 2 + STORE_ID_LEN + KREPLAY_EVENT_ID_DIGITS;
  Group *g = groupOf(a->conn, service);
  if (g == NULL || !reserveGroup(g, room)) return -1;
  unsigned char *const spanStart = g->data + g->len;
  Out o = {spanStart};
  *o.p++ = 0x12; /* ScopeSpans.spans */
  unsigned char *const lengthAt = o.p;
  o.p += 2; /* the length's varint (two bytes for most spans), the body moved when it takes another size */
  unsigned char *const body = o.p;

  unsigned char id[16];
  hexBytes(trace.s, 16, id);
  putLenField(&o, 0x0a, id, 16);
  spanIdFor(spec, (uint64_t)seq, id);
  putLenField(&o, 0x12, id, 8);
  if (parent.s != NULL) {
    hexBytes(parent.s, 8, id);
    putLenField(&o, 0x22, id, 8);
  }
  /* name */
  *o.p++ = 0x2a;
  if (block) {
    const int n = typeName.n + 1 + opName.n + 1 + deviceLen;
    putVarint(&o, (uint64_t)n);
    putBytes(&o, typeName.s, typeName.n);
    *o.p++ = ' ';
    putBytes(&o, opName.s, opName.n);
    *o.p++ = ' ';
    putBytes(&o, device, deviceLen);
  } else if (target.s == NULL) {
    putVarint(&o, (uint64_t)typeName.n);
    putBytes(&o, typeName.s, typeName.n);
  } else {
    putVarint(&o, (uint64_t)(typeName.n + 1 + target.n));
    putBytes(&o, typeName.s, typeName.n);
    *o.p++ = ' ';
    putBytes(&o, target.s, target.n);
  }
  *o.p++ = 0x30; /* kind: SPAN_KIND_INTERNAL */
  *o.p++ = 1;
  *o.p++ = 0x39;
  putFixed64(&o, (uint64_t)ts);
  *o.p++ = 0x41;
  putFixed64(&o, (uint64_t)ts + (uint64_t)dur);

  char eventId[STORE_ID_LEN + KREPLAY_EVENT_ID_DIGITS];
  const int eventIdLen = kreplay_format_event_id(eventId, spec->storeId, STORE_ID_LEN, (uint64_t)ts, (uint64_t)seq);
  ATTR_INT(&o, "process.pid", pid);
  ATTR_INT(&o, "thread.id", tid);
  ATTR_STRING(&o, "thread.name", comm.s, comm.n);
  ATTR_STRING(&o, "kreplay.event_id", eventId, eventIdLen);
  ATTR_STRING(&o, "kreplay.event_type", typeName.s, typeName.n);
  ATTR_INT(&o, "kreplay.bytes", bytes);
  if (txn.s != NULL) ATTR_STRING(&o, "kreplay.transaction_id", txn.s, txn.n);
  if (parent.s == NULL) ATTR_TRUE(&o, "kreplay.parent_span_unknown");
  if (block) {
    ATTR_STRING(&o, "kreplay.device", device, deviceLen);
    ATTR_STRING(&o, "kreplay.op", opName.s, opName.n);
    ATTR_INT(&o, "kreplay.sector", sector);
  } else {
    const Str syscallName = spec->names[T_SYSCALL][syscall];
    ATTR_STRING(&o, "kreplay.syscall", syscallName.s, syscallName.n);
    ATTR_INT(&o, "kreplay.fd", fd);
    ATTR_INT(&o, "kreplay.ret", ret);
    if (target.s != NULL) {
      const Str kindName = spec->names[T_KIND][kind];
      ATTR_STRING(&o, "kreplay.target_kind", kindName.s, kindName.n);
      ATTR_STRING(&o, "kreplay.target", target.s, target.n);
      if (spec->isFile[kind])
        ATTR_STRING(&o, "file.path", target.s, target.n);
      else if (socketMatch) {
        /* an accepted connection is named by the listening address, this side's */
        ATTR_STRING(&o, "network.transport", socket.transport.s, socket.transport.n);
        ATTR_STRING(&o, "network.type", socket.v6 ? "ipv6" : "ipv4", 4);
        if (socket.accepted) {
          ATTR_STRING(&o, "network.local.address", socket.address.s, socket.address.n);
          ATTR_INT(&o, "network.local.port", socket.port);
        } else {
          ATTR_STRING(&o, "network.peer.address", socket.address.s, socket.address.n);
          ATTR_INT(&o, "network.peer.port", socket.port);
        }
      } else if (unixSocket) {
        ATTR_STRING(&o, "network.transport", "unix", 4);
        ATTR_STRING(&o, "network.peer.address", target.s + 5, target.n - 5);
      }
    }
    if (hasResponse) ATTR_INT(&o, "kreplay.response_ns", response);
    if (hasRequestKey) ATTR_INT(&o, "kreplay.request_key", requestKey);
  }
  if (errorName.s != NULL) ATTR_STRING(&o, "error.type", errorName.s, errorName.n);
  /* status: the error's name as its message, code ERROR (2), else UNSET (0) */
  *o.p++ = 0x7a;
  if (errorName.s != NULL) {
    putVarint(&o, (uint64_t)(1 + varintSize((uint64_t)errorName.n) + errorName.n + 2));
    putLenField(&o, 0x12, errorName.s, errorName.n);
    *o.p++ = 0x18;
    *o.p++ = 2;
  } else {
    *o.p++ = 2;
    *o.p++ = 0x18;
    *o.p++ = 0;
  }
  /* flags (fixed32): the W3C flags, sampled as exported, and the parent's remoteness known */
  *o.p++ = 0x85;
  *o.p++ = 0x01;
  const uint32_t spanFlags = (uint32_t)((flags | 1) & 0xff) | 0x100 | (parent.s != NULL ? 0x200 : 0);
  for (int i = 0; i < 4; i++) *o.p++ = (unsigned char)(spanFlags >> (8 * i));

  const int64_t length = o.p - body;
  const int size = varintSize((uint64_t)length);
  if (size != 2) memmove(lengthAt + size, body, (size_t)length);
  Out l = {lengthAt};
  putVarint(&l, (uint64_t)length);
  g->len += 1 + size + length;
  g->spans++;
  return 1;
}

static void otlpStep(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  Agg *a = sqlite3_aggregate_context(ctx, sizeof *a);
  if (a == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (a->failed) return;
  if (!a->started && !start(ctx, a, argc, argv)) {
    a->failed = 1;
    return;
  }
  const int64_t seq = sqlite3_value_int64(argv[A_SEQ]);
  if (a->nHeld > 0 && isHeld(a, seq)) return;
  const int64_t ctxId = sqlite3_value_int64(argv[A_CTX]);
  /* what eventSpan cannot tell apart from a W3C trace in another type: for the TS side */
  const int traceType = sqlite3_value_type(argv[A_TRACE]);
  int64_t flags = 0;
  Str trace;
  int written = 0;
  if (traceType == SQLITE_BLOB || !intOf(argv[A_FLAGS], 0, &flags))
    written = 0;
  else {
    trace.s = traceType == SQLITE_TEXT ? sqlite3_value_text(argv[A_TRACE]) : NULL;
    trace.n = trace.s ? sqlite3_value_bytes(argv[A_TRACE]) : 0;
    /* a marker's free-form trace, or none: no trace to put the event in */
    if (!isW3cTraceId(trace)) return;
    CtxCount *count = ctxCountOf(a, ctxId, trace);
    if (count == NULL) goto nomem;
    if (a->spec->sampledOnly && !(flags & 1)) {
      count->unsampled++;
      return;
    }
    written = writeSpan(a, argv, seq, trace, flags);
    if (written < 0) goto nomem;
    if (written) count->spans++;
  }
  if (!written && !leaveToTs(a, seq, ctxId)) goto nomem;
  return;
nomem:
  a->failed = 1;
  sqlite3_result_error_nomem(ctx);
}

static void putDouble(unsigned char **p, double v) {
  memcpy(*p, &v, 8);
  *p += 8;
}

static void freeAgg(Agg *a) {
  sqlite3_free(a->ctxs);
  sqlite3_free(a->left);
  sqlite3_free(a->held);
}

static void otlpFinal(sqlite3_context *ctx) {
  Agg *a = sqlite3_aggregate_context(ctx, 0);
  if (a == NULL) {
    /* no rows: no groups, contexts or rows left */
    unsigned char empty[24] = {0};
    sqlite3_result_blob(ctx, empty, sizeof empty, SQLITE_TRANSIENT);
    return;
  }
  if (a->failed) {
    if (a->conn) undo(a->conn);
    freeAgg(a);
    return;
  }
  const Conn *c = a->conn;
  int added = 0;
  for (int i = 0; c && i < c->nGroups; i++) added += c->groups[i].spans > c->groups[i].markSpans;
  const int64_t size = 8 + added * 24 + 8 + a->ctxUsed * (24 + TRACE_ID_LEN) + 8 + a->nLeft * 16;
  unsigned char *out = sqlite3_malloc64((sqlite3_uint64)size);
  if (out == NULL) {
    undo(a->conn);
    freeAgg(a);
    sqlite3_result_error_nomem(ctx);
    return;
  }
  unsigned char *p = out;
  putDouble(&p, added);
  for (int i = 0; c && i < c->nGroups; i++) {
    const Group *g = &c->groups[i];
    if (g->spans == g->markSpans) continue;
    putDouble(&p, (double)g->service);
    putDouble(&p, (double)(g->spans - g->markSpans));
    putDouble(&p, (double)(g->len - g->markLen));
  }
  putDouble(&p, (double)a->ctxUsed);
  for (int64_t i = 0; i < a->ctxCap; i++) {
    const CtxCount *count = &a->ctxs[i];
    if (!count->used) continue;
    putDouble(&p, (double)count->ctx);
    putDouble(&p, (double)count->spans);
    putDouble(&p, (double)count->unsampled);
    memcpy(p, count->trace, TRACE_ID_LEN);
    p += TRACE_ID_LEN;
  }
  putDouble(&p, (double)a->nLeft);
  if (a->nLeft) memcpy(p, a->left, (size_t)a->nLeft * 16);
  freeAgg(a);
  sqlite3_result_blob64(ctx, out, (sqlite3_uint64)size, sqlite3_free);
}

/*
 * kreplay_otlp_request(layout, level): the open request's bytes, gzipped at `level` (libdeflate;
 * 0: as they are). The layout (core/otlp/span-protobuf.ts writes it: the framing is the TS side's)
 * is a list of chunks, each a double 0 and then a length and that many bytes, or a double 1 and a
 * service id, for that service's spans written since the last request; each service with spans
 * must be named once. The spans go with it.
 */
static void otlpRequest(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  Conn *c = sqlite3_user_data(ctx);
  const unsigned char *layout = sqlite3_value_blob(argv[0]);
  const int64_t n = sqlite3_value_bytes(argv[0]);
  const int level = sqlite3_value_int(argv[1]);
  char *error = NULL;
  if (level < 0 || level > 12) {
    error = sqlite3_mprintf("kreplay_otlp_request: gzip level %d is not 0..12", level);
    goto fail;
  }
  /* two passes: check and size, then copy */
  int64_t size = 0;
  for (int pass = 0; pass < 2; pass++) {
    int64_t at = 0, to = 0;
    for (int i = 0; i < c->nGroups; i++) c->groups[i].named = 0;
    while (at < n) {
      double kind, value;
      if (at + 16 > n) goto bad;
      memcpy(&kind, layout + at, 8);
      memcpy(&value, layout + at + 8, 8);
      at += 16;
      if (kind == 0) {
        if (value < 0 || value > (double)(n - at)) goto bad;
        if (pass) memcpy(c->raw + to, layout + at, (size_t)value);
        at += (int64_t)value;
        to += (int64_t)value;
      } else if (kind == 1) {
        Group *g = NULL;
        for (int i = 0; i < c->nGroups && g == NULL; i++)
          if ((double)c->groups[i].service == value) g = &c->groups[i];
        if (g == NULL || g->spans == 0 || g->named) {
          error = sqlite3_mprintf("kreplay_otlp_request: service %lld has no spans to send, or is named twice",
                                  (long long)value);
          goto fail;
        }
        g->named = 1;
        if (pass) memcpy(c->raw + to, g->data, (size_t)g->len);
        to += g->len;
      } else
        goto bad;
    }
    for (int i = 0; i < c->nGroups; i++)
      if (c->groups[i].spans > 0 && !c->groups[i].named) {
        error = sqlite3_mprintf("kreplay_otlp_request: the spans of service %lld are not in the layout",
                                (long long)c->groups[i].service);
        goto fail;
      }
    size = to;
    if (!pass && !reserveScratch(&c->raw, &c->rawCap, size)) goto nomem;
  }
  if (level == 0) {
    clearGroups(c);
    sqlite3_result_blob64(ctx, c->raw, (sqlite3_uint64)size, SQLITE_TRANSIENT);
    return;
  }
  if (c->gzip == NULL || c->gzipLevel != level) {
    libdeflate_free_compressor(c->gzip);
    c->gzip = libdeflate_alloc_compressor(level);
    c->gzipLevel = level;
    if (c->gzip == NULL) goto nomem;
  }
  const size_t bound = libdeflate_gzip_compress_bound(c->gzip, (size_t)size);
  if (!reserveScratch(&c->packed, &c->packedCap, (int64_t)bound)) goto nomem;
  const size_t packed = libdeflate_gzip_compress(c->gzip, c->raw, (size_t)size, c->packed, bound);
  if (packed == 0) {
    sqlite3_result_error(ctx, "kreplay_otlp_request: gzip found no room in its bound", -1);
    return;
  }
  clearGroups(c);
  sqlite3_result_blob64(ctx, c->packed, (sqlite3_uint64)packed, SQLITE_TRANSIENT);
  return;
bad:
  error = sqlite3_mprintf("kreplay_otlp_request: the layout is not chunks of bytes and services");
fail:
  if (error == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_error(ctx, error, -1);
  sqlite3_free(error);
  return;
nomem:
  sqlite3_result_error_nomem(ctx);
}

/*
 * kreplay_otlp_undo(): the spans of the last kreplay_otlp_spans that had rows taken back out of the
 * open request (1).
 */
static void otlpUndo(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc, (void)argv;
  undo(sqlite3_user_data(ctx));
  sqlite3_result_int(ctx, 1);
}

static void freeConn(void *p) {
  Conn *c = p;
  freeSpec(c->spec);
  for (int i = 0; i < c->nGroups; i++) sqlite3_free(c->groups[i].data);
  sqlite3_free(c->groups);
  libdeflate_free_compressor(c->gzip);
  sqlite3_free(c->raw);
  sqlite3_free(c->packed);
  sqlite3_free(c);
}

int kreplay_otlp_register(sqlite3 *db) {
  Conn *c = sqlite3_malloc(sizeof *c);
  if (c == NULL) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  /* the last of the three owns the state: functions are destroyed in the order they were made */
  int rc =
      sqlite3_create_function_v2(db, "kreplay_otlp_spans", N_ARGS, SQLITE_UTF8, c, NULL, otlpStep, otlpFinal, NULL);
  if (rc != SQLITE_OK) {
    freeConn(c);
    return rc;
  }
  /* past here a failure leaves the state to the functions made (a few bytes, until the connection closes) */
  rc = sqlite3_create_function_v2(db, "kreplay_otlp_undo", 0, SQLITE_UTF8, c, otlpUndo, NULL, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  return sqlite3_create_function_v2(db, "kreplay_otlp_request", 2, SQLITE_UTF8, c, otlpRequest, NULL, NULL, freeConn);
}
