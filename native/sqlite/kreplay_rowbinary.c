/*
 * kreplay_rowbinary(spec, v1, ..., vN): an aggregate SQLite function that
 * encodes the rows it is given as ClickHouse RowBinary, one blob for the
 * whole group, so that the shipper turns a batch of the node file into the
 * bytes of an INSERT ... FORMAT RowBinary with one statement and no value
 * crossing into JavaScript (agent/ship/ship-batch.ts owns the SQL).
 *
 * spec names the ClickHouse type of each value, space-separated, in order:
 * `s` String (text as UTF-8, a blob as its bytes), `1` `2` `4` `8` an integer
 * of that many bytes (signed or not: little-endian two's complement either
 * way), each with an `n` before it for Nullable (`ns`, `n8`). RowBinary writes
 * a String as a LEB128 length and its bytes, an integer in its width, and a
 * Nullable as one byte (1 = NULL) before the value when there is one.
 */
#include <stdint.h>
#include <string.h>

#include "kreplay_event_id.h"
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT3

#define MAX_COLUMNS 64

typedef struct {
  unsigned char *data;
  sqlite3_int64 len;
  sqlite3_int64 cap;
  int nColumns;
  int failed;
  /* per column: 0 for String, else the integer width; and whether it is Nullable */
  unsigned char width[MAX_COLUMNS];
  unsigned char nullable[MAX_COLUMNS];
} Encoder;

static int parseSpec(Encoder *e, const char *spec, int nValues, char **error) {
  int n = 0;
  for (const char *p = spec; *p;) {
    if (*p == ' ') {
      p++;
      continue;
    }
    if (n == MAX_COLUMNS) {
      *error = sqlite3_mprintf("kreplay_rowbinary: more than %d columns", MAX_COLUMNS);
      return 0;
    }
    e->nullable[n] = *p == 'n';
    if (*p == 'n') p++;
    switch (*p) {
      case 's':
        e->width[n] = 0;
        break;
      case '1':
      case '2':
      case '4':
      case '8':
        e->width[n] = (unsigned char)(*p - '0');
        break;
      default:
        *error =
            sqlite3_mprintf("kreplay_rowbinary: bad type %.3Q in spec %Q (s, 1, 2, 4, 8, each maybe after n)", p, spec);
        return 0;
    }
    p++;
    n++;
  }
  if (n != nValues) {
    *error = sqlite3_mprintf("kreplay_rowbinary: spec %Q names %d columns, %d values given", spec, n, nValues);
    return 0;
  }
  e->nColumns = n;
  return 1;
}

/* Room for `more` bytes; 0 when memory ran out. */
static int reserve(Encoder *e, sqlite3_int64 more) {
  if (e->len + more <= e->cap) return 1;
  /* a batch of 10,000 events takes about 2 MB: start at 1 MB rather than doubling up from a little */
  sqlite3_int64 cap = e->cap ? e->cap : 1 << 20;
  while (cap < e->len + more) cap *= 2;
  unsigned char *data = sqlite3_realloc64(e->data, (sqlite3_uint64)cap);
  if (data == NULL) return 0;
  e->data = data;
  e->cap = cap;
  return 1;
}

static void rowbinaryStep(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  Encoder *e = sqlite3_aggregate_context(ctx, sizeof *e);
  if (e == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (e->failed) return;
  if (e->nColumns == 0) {
    char *error = NULL;
    const char *spec = (const char *)sqlite3_value_text(argv[0]);
    if (!parseSpec(e, spec ? spec : "", argc - 1, &error)) {
      e->failed = 1;
      sqlite3_result_error(ctx, error ? error : "kreplay_rowbinary: out of memory", -1);
      sqlite3_free(error);
      return;
    }
  }
  for (int i = 0; i < e->nColumns; i++) {
    sqlite3_value *v = argv[1 + i];
    const int isNull = sqlite3_value_type(v) == SQLITE_NULL;
    if (isNull && !e->nullable[i]) {
      e->failed = 1;
      char *error = sqlite3_mprintf("kreplay_rowbinary: value %d is NULL and its column is not Nullable", i + 1);
      sqlite3_result_error(ctx, error ? error : "kreplay_rowbinary: NULL in a column that is not Nullable", -1);
      sqlite3_free(error);
      return;
    }
    /* the largest a value can take here: flag, LEB128 length (10 bytes at most), integer */
    if (!reserve(e, 1 + 10 + 8)) goto nomem;
    if (e->nullable[i]) e->data[e->len++] = isNull ? 1 : 0;
    if (isNull) continue;
    if (e->width[i] != 0) {
      /* little-endian, as x86 and arm64 store it: the low bytes of the 64-bit value */
      const sqlite3_int64 x = sqlite3_value_int64(v);
      memcpy(e->data + e->len, &x, e->width[i]);
      e->len += e->width[i];
      continue;
    }
    const void *bytes =
        sqlite3_value_type(v) == SQLITE_BLOB ? sqlite3_value_blob(v) : (const void *)sqlite3_value_text(v);
    sqlite3_uint64 n = (sqlite3_uint64)sqlite3_value_bytes(v);
    if (bytes == NULL && n > 0) goto nomem;
    do {
      e->data[e->len++] = (unsigned char)((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
      n >>= 7;
    } while (n);
    const sqlite3_int64 size = sqlite3_value_bytes(v);
    if (!reserve(e, size)) goto nomem;
    if (size) memcpy(e->data + e->len, bytes, (size_t)size);
    e->len += size;
  }
  return;
nomem:
  e->failed = 1;
  sqlite3_result_error_nomem(ctx);
}

static void rowbinaryFinal(sqlite3_context *ctx) {
  Encoder *e = sqlite3_aggregate_context(ctx, 0);
  if (e == NULL) {
    /* no rows */
    sqlite3_result_zeroblob(ctx, 0);
    return;
  }
  if (e->failed) {
    sqlite3_free(e->data);
    return;
  }
  /* the buffer becomes the result's: SQLite frees it */
  if (e->data == NULL)
    sqlite3_result_zeroblob(ctx, 0);
  else
    sqlite3_result_blob64(ctx, e->data, (sqlite3_uint64)e->len, sqlite3_free);
}

/*
 * kreplay_event_id(store_id, ts, seq): the event id as core/model/event-id.ts formats it
 * (kreplay_event_id.h); a sixth of a batch's encoding when printf() made it.
 */
static void eventId(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const unsigned char *store = sqlite3_value_text(argv[0]);
  const int storeLen = sqlite3_value_bytes(argv[0]);
  if (store == NULL || storeLen > 64) {
    sqlite3_result_error(ctx, "kreplay_event_id: the store id must be text of at most 64 bytes", -1);
    return;
  }
  char id[64 + KREPLAY_EVENT_ID_DIGITS];
  const int n = kreplay_format_event_id(id, store, storeLen, (uint64_t)sqlite3_value_int64(argv[1]),
                                        (uint64_t)sqlite3_value_int64(argv[2]));
  sqlite3_result_text(ctx, id, n, SQLITE_TRANSIENT);
}

int kreplay_rowbinary_register(sqlite3 *db) {
  int rc = sqlite3_create_function_v2(db, "kreplay_rowbinary", -1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, NULL,
                                      rowbinaryStep, rowbinaryFinal, NULL);
  if (rc != SQLITE_OK) return rc;
  return sqlite3_create_function_v2(db, "kreplay_event_id", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, eventId, NULL,
                                    NULL, NULL);
}
