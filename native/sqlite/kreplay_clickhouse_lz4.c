/*
 * kreplay_clickhouse_lz4(blob): the blob in ClickHouse's own compressed-block
 * framing with LZ4, the body ClickHouse's HTTP interface decompresses itself
 * with `decompress=1` (18.16 takes no LZ4 as a Content-Encoding). Each block
 * of at most BLOCK_BYTES of input is a 16-byte CityHash128 (v1.0.2) of what
 * follows it, the method byte 0x82 (LZ4), the block's compressed size with
 * this 9-byte header and its input size (both 32-bit little-endian), then the
 * LZ4 block. The shipper wraps its batch's RowBinary in it (agent/ship/ship-sql.ts).
 */
#include <lz4.h>
#include <stdint.h>
#include <string.h>

#include "cityhash102.h"
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT3

/* ClickHouse's own max_compress_block_size */
#define BLOCK_BYTES (1 << 20)
#define CHECKSUM_BYTES 16
#define HEADER_BYTES 9
#define METHOD_LZ4 0x82

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void clickhouseLz4(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const unsigned char *in = sqlite3_value_blob(argv[0]);
  const sqlite3_int64 len = sqlite3_value_bytes(argv[0]);
  if (len == 0) {
    sqlite3_result_zeroblob(ctx, 0);
    return;
  }
  const sqlite3_int64 blocks = (len + BLOCK_BYTES - 1) / BLOCK_BYTES;
  const sqlite3_int64 cap = blocks * (CHECKSUM_BYTES + HEADER_BYTES + LZ4_compressBound(BLOCK_BYTES));
  unsigned char *out = sqlite3_malloc64((sqlite3_uint64)cap);
  if (out == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_int64 at = 0;
  for (sqlite3_int64 from = 0; from < len; from += BLOCK_BYTES) {
    const int size = (int)(len - from < BLOCK_BYTES ? len - from : BLOCK_BYTES);
    unsigned char *block = out + at + CHECKSUM_BYTES;
    const int packed =
        LZ4_compress_default((const char *)in + from, (char *)block + HEADER_BYTES, size, LZ4_compressBound(size));
    if (packed <= 0) {
      sqlite3_free(out);
      sqlite3_result_error(ctx, "kreplay_clickhouse_lz4: LZ4 could not compress a block", -1);
      return;
    }
    block[0] = METHOD_LZ4;
    put32(block + 1, (uint32_t)(HEADER_BYTES + packed));
    put32(block + 5, (uint32_t)size);
    uint64_t sum[2];
    kreplay_cityhash102_128(block, (size_t)(HEADER_BYTES + packed), sum);
    put64(out + at, sum[0]);
    put64(out + at + 8, sum[1]);
    at += CHECKSUM_BYTES + HEADER_BYTES + packed;
  }
  sqlite3_result_blob64(ctx, out, (sqlite3_uint64)at, sqlite3_free);
}

int kreplay_clickhouse_lz4_register(sqlite3 *db) {
  return sqlite3_create_function_v2(db, "kreplay_clickhouse_lz4", 1, SQLITE_DETERMINISTIC, NULL, clickhouseLz4, NULL,
                                    NULL, NULL);
}
