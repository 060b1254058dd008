/*
 * kreplay_batch: a table-valued SQLite function over one chunk of the agent's
 * EventBatch columns (agent/ingest/event-batch.ts), each bound as a blob, so
 * that a whole transaction's rows go into the events table with one
 * `INSERT ... SELECT` and no per-value crossing from JavaScript into C
 * (binding 13 values a row cost about as much as SQLite's B-tree work).
 *
 * Loaded into the agent's writer connection only (agent/store/event-insert.ts
 * owns the SQL that maps these columns to the events table). Each blob holds n
 * elements of its column's C type; the type column (n bytes) gives n and
 * `type` each row's. Every row comes back, in the batch's order, so that a
 * transaction's rows go in with one statement whatever their types, in the
 * order the B-trees' keys mostly follow (issue 46); `k` numbers them
 * from 0. Whole-number doubles come back as integers, as SQLite's INTEGER
 * affinity would store them, an id of 0 (ctx, target) and a time of 0
 * (response) come back as NULL.
 *
 * The picks (pick0, pick1, ...): a data column as only some record types fill
 * it, NULL in the others' rows. The last argument says, once a statement,
 * which column and which types each pick is (agent/store/event-insert.ts makes
 * it from core/store/event-columns.ts): the row's type is read here, not once a
 * column through `CASE type WHEN ...` in the statement (issue 46).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

/* The batch columns in the order of this table's visible columns after k, as agent/ingest/batch-columns.ts lists them
 * (test/unit/batch-columns.test.ts compiles this table and compares): name and element type. */
/* ID: a u32 id whose 0 means none (NULL), as the batch's ctx and target do; NS: an F64 time, 0 = none */
typedef enum { F64, U32, I32, ID, NS } Kind;
static const struct {
  const char *name;
  Kind kind;
} kColumns[] = {
    {"ts_offset", F64}, {"dur", F64},   {"bytes", F64}, {"handle", F64},  {"result", F64},
    {"service", F64},   {"ctx", ID},    {"pid", U32},   {"tid", U32},     {"comm", U32},
    {"kind", U32},      {"error", I32}, {"target", ID}, {"response", NS},
};
#define N_DATA ((int)(sizeof kColumns / sizeof kColumns[0]))
/* room for the picks the events table needs (ten today); the picks argument names how many are used */
#define N_PICKS 16
/* a pick in the picks argument: the data column's index, then the types that fill it as a 64-bit little-endian mask */
#define PICK_BYTES 9
/* visible: k, type, the data columns, the picks; hidden (the arguments): types, one blob per data column, picks.
 * 16 arguments is the most whose equality SQLite leaves to xFilter (see batchBestIndex): every one is taken. */
#define COL_K 0
#define COL_TYPE 1
#define COL_DATA 2
#define COL_PICK (COL_DATA + N_DATA)
#define COL_TYPES (COL_PICK + N_PICKS)
#define N_ARGS (2 + N_DATA)

typedef struct {
  int column;     /* into kColumns */
  uint64_t types; /* bit t: rows of record type t give the column's value, the others NULL */
} Pick;

typedef struct {
  sqlite3_vtab_cursor base;
  /*
   * Into the statement's bound blobs, not copies (a batch's worth of memory each time): xFilter's
   * arguments are registers holding the parameters, which cannot change while the statement runs.
   */
  const unsigned char *types;
  const void *data[N_DATA];
  Pick picks[N_PICKS];
  int nPicks;
  int64_t n;
  int64_t row;
} Cursor;

static int widthOf(Kind kind) { return kind == F64 || kind == NS ? 8 : 4; }

static int batchConnect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **vtab, char **err) {
  (void)aux, (void)argc, (void)argv, (void)err;
  char schema[2048] = "CREATE TABLE x(k, type";
  for (int i = 0; i < N_DATA; i++) {
    strcat(schema, ", ");
    strcat(schema, kColumns[i].name);
  }
  for (int i = 0; i < N_PICKS; i++) {
    char pick[16];
    sqlite3_snprintf(sizeof pick, pick, ", pick%d", i);
    strcat(schema, pick);
  }
  strcat(schema, ", types HIDDEN");
  for (int i = 0; i < N_DATA; i++) {
    strcat(schema, ", ");
    strcat(schema, kColumns[i].name);
    strcat(schema, "_data HIDDEN");
  }
  strcat(schema, ", picks HIDDEN)");
  int rc = sqlite3_declare_vtab(db, schema);
  if (rc != SQLITE_OK) return rc;
  *vtab = sqlite3_malloc(sizeof **vtab);
  if (*vtab == NULL) return SQLITE_NOMEM;
  memset(*vtab, 0, sizeof **vtab);
  return SQLITE_OK;
}

static int batchDisconnect(sqlite3_vtab *vtab) {
  sqlite3_free(vtab);
  return SQLITE_OK;
}

/* Every argument must be given (an equality on its hidden column); they reach xFilter in column order. */
static int batchBestIndex(sqlite3_vtab *vtab, sqlite3_index_info *info) {
  int given = 0;
  for (int i = 0; i < info->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &info->aConstraint[i];
    if (c->iColumn < COL_TYPES || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (!c->usable) return SQLITE_CONSTRAINT;
    info->aConstraintUsage[i].argvIndex = c->iColumn - COL_TYPES + 1;
    info->aConstraintUsage[i].omit = 1;
    given |= 1 << (c->iColumn - COL_TYPES);
  }
  if (given != (1 << N_ARGS) - 1) {
    sqlite3_free(vtab->zErrMsg);
    vtab->zErrMsg =
        sqlite3_mprintf("kreplay_batch takes %d arguments: types, one blob per column, then the picks", N_ARGS);
    return SQLITE_ERROR;
  }
  info->estimatedCost = 1e6;
  return SQLITE_OK;
}

static int batchOpen(sqlite3_vtab *vtab, sqlite3_vtab_cursor **cursor) {
  (void)vtab;
  Cursor *c = sqlite3_malloc(sizeof *c);
  if (c == NULL) return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  *cursor = &c->base;
  return SQLITE_OK;
}

static int batchClose(sqlite3_vtab_cursor *cursor) {
  sqlite3_free(cursor);
  return SQLITE_OK;
}

static int fail(Cursor *c, char *message) {
  sqlite3_free(c->base.pVtab->zErrMsg);
  c->base.pVtab->zErrMsg = message;
  return message == NULL ? SQLITE_NOMEM : SQLITE_ERROR;
}

static int batchFilter(sqlite3_vtab_cursor *cursor, int idxNum, const char *idxStr, int argc, sqlite3_value **argv) {
  (void)idxNum, (void)idxStr;
  Cursor *c = (Cursor *)cursor;
  c->n = c->row = 0;
  if (argc != N_ARGS) return fail(c, sqlite3_mprintf("kreplay_batch: %d arguments, expected %d", argc, N_ARGS));
  c->n = sqlite3_value_bytes(argv[0]);
  c->types = sqlite3_value_blob(argv[0]);
  for (int i = 0; i < N_DATA; i++) {
    sqlite3_value *v = argv[1 + i];
    int64_t want = c->n * widthOf(kColumns[i].kind);
    if (sqlite3_value_bytes(v) != want || (want > 0 && sqlite3_value_type(v) != SQLITE_BLOB)) {
      int64_t got = sqlite3_value_bytes(v);
      c->n = 0;
      return fail(c,
                  sqlite3_mprintf("kreplay_batch: %s holds %lld bytes, expected %lld for %lld rows", kColumns[i].name,
                                  (long long)got, (long long)want, (long long)(want / widthOf(kColumns[i].kind))));
    }
    c->data[i] = sqlite3_value_blob(v);
  }
  sqlite3_value *picks = argv[1 + N_DATA];
  const int bytes = sqlite3_value_bytes(picks);
  const unsigned char *p = sqlite3_value_blob(picks);
  if (bytes % PICK_BYTES != 0 || bytes / PICK_BYTES > N_PICKS) {
    c->n = 0;
    return fail(c, sqlite3_mprintf("kreplay_batch: picks hold %d bytes, not at most %d picks of %d bytes", bytes,
                                   N_PICKS, PICK_BYTES));
  }
  c->nPicks = bytes / PICK_BYTES;
  for (int i = 0; i < c->nPicks; i++, p += PICK_BYTES) {
    if (p[0] >= N_DATA) {
      c->n = 0;
      return fail(c, sqlite3_mprintf("kreplay_batch: pick %d names column %d of %d", i, p[0], N_DATA));
    }
    c->picks[i].column = p[0];
    c->picks[i].types = 0;
    for (int b = 0; b < 8; b++) c->picks[i].types |= (uint64_t)p[1 + b] << (8 * b);
  }
  return SQLITE_OK;
}

static int batchNext(sqlite3_vtab_cursor *cursor) {
  Cursor *c = (Cursor *)cursor;
  c->row++;
  return SQLITE_OK;
}

static int batchEof(sqlite3_vtab_cursor *cursor) {
  Cursor *c = (Cursor *)cursor;
  return c->row >= c->n;
}

/* Data column i of the current row. */
static void resultOf(const Cursor *c, sqlite3_context *ctx, int i) {
  const int64_t r = c->row;
  switch (kColumns[i].kind) {
    case F64:
    case NS: {
      double v;
      memcpy(&v, (const char *)c->data[i] + r * 8, 8);
      if (v == 0 && kColumns[i].kind == NS)
        sqlite3_result_null(ctx);
      else if (v == trunc(v) && fabs(v) < 9.2e18)
        sqlite3_result_int64(ctx, (sqlite3_int64)v);
      else
        sqlite3_result_double(ctx, v);
      break;
    }
    case U32:
    case ID: {
      uint32_t v;
      memcpy(&v, (const char *)c->data[i] + r * 4, 4);
      if (v == 0 && kColumns[i].kind == ID)
        sqlite3_result_null(ctx);
      else
        sqlite3_result_int64(ctx, v);
      break;
    }
    case I32: {
      int32_t v;
      memcpy(&v, (const char *)c->data[i] + r * 4, 4);
      sqlite3_result_int64(ctx, v);
      break;
    }
  }
}

static int batchColumn(sqlite3_vtab_cursor *cursor, sqlite3_context *ctx, int col) {
  Cursor *c = (Cursor *)cursor;
  if (col == COL_K) {
    sqlite3_result_int64(ctx, c->row);
  } else if (col == COL_TYPE) {
    sqlite3_result_int(ctx, c->types[c->row]);
  } else if (col < COL_PICK) {
    resultOf(c, ctx, col - COL_DATA);
  } else if (col < COL_TYPES) {
    const int i = col - COL_PICK;
    if (i >= c->nPicks) {
      sqlite3_result_error(ctx, "kreplay_batch: a pick the picks argument does not give", -1);
      return SQLITE_ERROR;
    }
    const unsigned type = c->types[c->row];
    /* a type past the mask's 64 bits fills no pick, as no `CASE type WHEN` names it */
    if (type < 64 && (c->picks[i].types >> type & 1)) resultOf(c, ctx, c->picks[i].column);
    /* else no result: NULL */
  }
  /* a hidden argument: never read back */
  return SQLITE_OK;
}

static int batchRowid(sqlite3_vtab_cursor *cursor, sqlite_int64 *rowid) {
  *rowid = ((Cursor *)cursor)->row;
  return SQLITE_OK;
}

static sqlite3_module kBatchModule = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only: used as kreplay_batch(...), never CREATE VIRTUAL TABLE */
    .xConnect = batchConnect,
    .xBestIndex = batchBestIndex,
    .xDisconnect = batchDisconnect,
    .xDestroy = batchDisconnect,
    .xOpen = batchOpen,
    .xClose = batchClose,
    .xFilter = batchFilter,
    .xNext = batchNext,
    .xEof = batchEof,
    .xColumn = batchColumn,
    .xRowid = batchRowid,
};

/* native/sqlite/kreplay_contexts.c: a batch's new contexts */
int kreplay_contexts_register(sqlite3 *db);
/* native/sqlite/kreplay_rowbinary.c: the shipper's encoder; kreplay_clickhouse_lz4.c: its LZ4 framing */
int kreplay_rowbinary_register(sqlite3 *db);
int kreplay_clickhouse_lz4_register(sqlite3 *db);
/* native/sqlite/kreplay_otlp.c: the OTLP export's span encoder */
int kreplay_otlp_register(sqlite3 *db);

int sqlite3_kreplaysqlite_init(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
  (void)err;
  SQLITE_EXTENSION_INIT2(api);
  int rc = sqlite3_create_module(db, "kreplay_batch", &kBatchModule, NULL);
  if (rc == SQLITE_OK) rc = kreplay_contexts_register(db);
  if (rc == SQLITE_OK) rc = kreplay_rowbinary_register(db);
  if (rc == SQLITE_OK) rc = kreplay_clickhouse_lz4_register(db);
  return rc == SQLITE_OK ? kreplay_otlp_register(db) : rc;
}
