/*
 * kreplay_contexts: a table-valued SQLite function over a batch's new contexts packed in four blobs
 * (agent/store/context-insert.ts packs them), so that they go into the contexts table with one
 * `INSERT ... SELECT`: one statement run a context cost about as much as its three B-trees (issue 46).
 *
 * Arguments: ids (n doubles, whole), flags (n int32, -1 = NULL), lengths (3n int32: the transaction
 * id's, the trace id's and the parent span id's bytes, -1 = NULL), text (those strings' UTF-8 bytes,
 * one after another in that order), seed (the store's seed for the keys, core/store/context-key-seed.ts,
 * read once a batch). Columns: id, transaction_id, trace_id, parent_span_id, trace_flags,
 * transaction_key, trace_key (the ids' lookup keys, core/store/context-key.ts).
 */
#include <stdint.h>
#include <string.h>

#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT3

#define N_TEXT 3
/* visible: id, the three strings, trace_flags, the two ids' keys; hidden (the arguments): the four blobs, the seed */
#define COL_FLAGS (1 + N_TEXT)
#define COL_TRANSACTION_KEY (COL_FLAGS + 1)
#define COL_TRACE_KEY (COL_FLAGS + 2)
#define COL_ARGS (COL_FLAGS + 3)
#define N_ARGS 5

typedef struct {
  sqlite3_vtab_cursor base;
  /* into the statement's bound blobs, which cannot change while it runs (as kreplay_batch's) */
  const unsigned char *ids;
  const unsigned char *flags;
  const unsigned char *lengths;
  const unsigned char *text;
  int64_t n;
  int64_t row;
  /* where the current row's first string starts in text */
  int64_t offset;
  uint32_t seed;
} Cursor;

static int contextsConnect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **vtab, char **err) {
  (void)aux, (void)argc, (void)argv, (void)err;
  int rc = sqlite3_declare_vtab(
      db,
      "CREATE TABLE x(id, transaction_id, trace_id, parent_span_id, trace_flags, transaction_key, trace_key, "
      "ids HIDDEN, flags HIDDEN, lengths HIDDEN, text HIDDEN, seed HIDDEN)");
  if (rc != SQLITE_OK) return rc;
  *vtab = sqlite3_malloc(sizeof **vtab);
  if (*vtab == NULL) return SQLITE_NOMEM;
  memset(*vtab, 0, sizeof **vtab);
  return SQLITE_OK;
}

static int contextsDisconnect(sqlite3_vtab *vtab) {
  sqlite3_free(vtab);
  return SQLITE_OK;
}

static int contextsBestIndex(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  int given = 0;
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    if (c->iColumn < COL_ARGS || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (!c->usable) return SQLITE_CONSTRAINT;
    info->aConstraintUsage[i].argvIndex = c->iColumn - COL_ARGS + 1;
    info->aConstraintUsage[i].omit = 1;
    given |= 1 << (c->iColumn - COL_ARGS);
  }
  if (given != (1 << N_ARGS) - 1) {
    sqlite3_free(vtab->zErrMsg);
    vtab->zErrMsg = sqlite3_mprintf("kreplay_contexts takes 5 arguments: ids, flags, lengths, text, seed");
    return SQLITE_ERROR;
  }
  info->estimatedCost = 1e6;
  return SQLITE_OK;
}

static int contextsOpen(sqlite3_vtab *vtab, sqlite3_vtab_cursor **cursor) {
  (void)vtab;
  Cursor *c = sqlite3_malloc(sizeof *c);
  if (c == NULL) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  *cursor = &c->base;
  return SQLITE_OK;
}

static int contextsClose(sqlite3_vtab_cursor *cursor) {
  sqlite3_free(cursor);
  return SQLITE_OK;
}

static int fail(Cursor *c, char *message) {
  c->n = 0;
  sqlite3_free(c->base.pVtab->zErrMsg);
  c->base.pVtab->zErrMsg = message;
  return message == NULL ? SQLITE_NOMEM : SQLITE_ERROR;
}

static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/*
 * An id's lookup key: MurmurHash3 (x86, 32 bits) of its UTF-8 bytes under the store's seed, as a
 * signed integer. The one definition is core/store/context-key.ts (the daemon's lookups compute it
 * there); this is its twin for the writer, held to it by test/unit/context-key.test.ts.
 */
static int32_t contextKey(const unsigned char *bytes, int32_t n, uint32_t seed) {
  const uint32_t c1 = 0xcc9e2d51, c2 = 0x1b873593;
  uint32_t h = seed, k;
  int32_t blocks = n & ~3;
  for (int32_t i = 0; i < blocks; i += 4) {
    memcpy(&k, bytes + i, 4); /* little-endian, as the TS reads it */
    h ^= rotl32(k * c1, 15) * c2;
    h = rotl32(h, 13) * 5 + 0xe6546b64;
  }
  int32_t tail = n & 3;
  if (tail > 0) {
    k = bytes[blocks];
    if (tail > 1) k |= (uint32_t)bytes[blocks + 1] << 8;
    if (tail > 2) k |= (uint32_t)bytes[blocks + 2] << 16;
    h ^= rotl32(k * c1, 15) * c2;
  }
  h ^= (uint32_t)n;
  h = (h ^ (h >> 16)) * 0x85ebca6b;
  h = (h ^ (h >> 13)) * 0xc2b2ae35;
  return (int32_t)(h ^ (h >> 16));
}

static int32_t int32At(const unsigned char *p, int64_t i) {
  int32_t v;
  memcpy(&v, p + i * 4, 4);
  return v;
}

/* An empty blob binds as a NULL pointer: a batch of no contexts. */
static const unsigned char *blobOf(sqlite3_value *v, int64_t want, int64_t *got) {
  *got = sqlite3_value_bytes(v);
  if (*got != want || (want > 0 && sqlite3_value_type(v) != SQLITE_BLOB)) return NULL;
  return sqlite3_value_blob(v);
}

static int contextsFilter(sqlite3_vtab_cursor *cursor, int idxNum, const char *idxStr, int argc, sqlite3_value **argv) {
  (void)idxNum, (void)idxStr;
  Cursor *c = (Cursor *)cursor;
  c->n = c->row = c->offset = 0;
  if (argc != N_ARGS) return fail(c, sqlite3_mprintf("kreplay_contexts: %d arguments, expected %d", argc, N_ARGS));
  int64_t n = sqlite3_value_bytes(argv[0]);
  if (n % 8 != 0 || (n > 0 && sqlite3_value_type(argv[0]) != SQLITE_BLOB))
    return fail(c,
                sqlite3_mprintf("kreplay_contexts: ids holds %lld bytes, not a whole number of doubles", (long long)n));
  n /= 8;
  static const char *const names[] = {"flags", "lengths"};
  const int64_t widths[] = {4, 4 * N_TEXT};
  const unsigned char **blobs[] = {&c->flags, &c->lengths};
  for (int i = 0; i < 2; i++) {
    int64_t got;
    *blobs[i] = blobOf(argv[1 + i], n * widths[i], &got);
    if (got != n * widths[i] || (*blobs[i] == NULL && got > 0))
      return fail(c, sqlite3_mprintf("kreplay_contexts: %s holds %lld bytes, expected %lld for %lld contexts", names[i],
                                     (long long)got, (long long)(n * widths[i]), (long long)n));
  }
  int64_t textBytes = 0;
  for (int64_t i = 0; i < n * N_TEXT; i++) {
    int32_t length = int32At(c->lengths, i);
    if (length < -1) return fail(c, sqlite3_mprintf("kreplay_contexts: a length of %d", (int)length));
    if (length > 0) textBytes += length;
  }
  int64_t got;
  c->text = blobOf(argv[3], textBytes, &got);
  if (got != textBytes || (c->text == NULL && got > 0))
    return fail(c, sqlite3_mprintf("kreplay_contexts: text holds %lld bytes, the lengths say %lld", (long long)got,
                                   (long long)textBytes));
  /* a JavaScript number binds as a double */
  int seedType = sqlite3_value_type(argv[4]);
  double seed = sqlite3_value_double(argv[4]);
  if ((seedType != SQLITE_INTEGER && seedType != SQLITE_FLOAT) || !(seed >= 0 && seed <= UINT32_MAX) ||
      seed != (double)(uint32_t)seed)
    return fail(c, sqlite3_mprintf("kreplay_contexts: the seed is not a 32-bit unsigned integer"));
  c->seed = (uint32_t)seed;
  c->ids = sqlite3_value_blob(argv[0]);
  c->n = n;
  return SQLITE_OK;
}

static int contextsNext(sqlite3_vtab_cursor *cursor) {
  Cursor *c = (Cursor *)cursor;
  for (int i = 0; i < N_TEXT; i++) {
    int32_t length = int32At(c->lengths, c->row * N_TEXT + i);
    if (length > 0) c->offset += length;
  }
  c->row++;
  return SQLITE_OK;
}

static int contextsEof(sqlite3_vtab_cursor *cursor) { return ((Cursor *)cursor)->row >= ((Cursor *)cursor)->n; }

/* Where the current row's string `i` (0: transaction id, 1: trace id, 2: parent span) starts in text. */
static int64_t textOffset(const Cursor *c, int i) {
  int64_t offset = c->offset;
  for (int j = 0; j < i; j++) {
    int32_t length = int32At(c->lengths, c->row * N_TEXT + j);
    if (length > 0) offset += length;
  }
  return offset;
}

static int contextsColumn(sqlite3_vtab_cursor *cursor, sqlite3_context *ctx, int col) {
  Cursor *c = (Cursor *)cursor;
  if (col == 0) {
    double id;
    memcpy(&id, c->ids + c->row * 8, 8);
    sqlite3_result_int64(ctx, (sqlite3_int64)id);
  } else if (col <= N_TEXT || col == COL_TRANSACTION_KEY || col == COL_TRACE_KEY) {
    int i = col <= N_TEXT ? col - 1 : col - COL_TRANSACTION_KEY;
    int32_t length = int32At(c->lengths, c->row * N_TEXT + i);
    /* a batch whose strings are all empty has no text blob: NULL, which sqlite3_result_text would store as NULL */
    static const unsigned char kEmpty[1];
    const unsigned char *text = c->text == NULL ? kEmpty : c->text + textOffset(c, i);
    if (length < 0)
      sqlite3_result_null(ctx);
    else if (col <= N_TEXT)
      sqlite3_result_text(ctx, (const char *)text, length, SQLITE_TRANSIENT);
    else
      sqlite3_result_int64(ctx, contextKey(text, length, c->seed));
  } else if (col == COL_FLAGS) {
    int32_t flags = int32At(c->flags, c->row);
    if (flags < 0)
      sqlite3_result_null(ctx);
    else
      sqlite3_result_int64(ctx, flags);
  }
  return SQLITE_OK; /* a hidden argument: never read back */
}

static int contextsRowid(sqlite3_vtab_cursor *cursor, sqlite_int64 *rowid) {
  *rowid = ((Cursor *)cursor)->row;
  return SQLITE_OK;
}

static sqlite3_module kContextsModule = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only */
    .xConnect = contextsConnect,
    .xBestIndex = contextsBestIndex,
    .xDisconnect = contextsDisconnect,
    .xDestroy = contextsDisconnect,
    .xOpen = contextsOpen,
    .xClose = contextsClose,
    .xFilter = contextsFilter,
    .xNext = contextsNext,
    .xEof = contextsEof,
    .xColumn = contextsColumn,
    .xRowid = contextsRowid,
};

int kreplay_contexts_register(sqlite3 *db) {
  return sqlite3_create_module(db, "kreplay_contexts", &kContextsModule, NULL);
}
