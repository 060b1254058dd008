/**
 * A transaction's events go in with one `INSERT ... SELECT` from
 * kreplay_batch (native/sqlite/kreplay_batch.c), a table-valued function over
 * the batch's columns bound as blobs: SQLite reads the typed arrays itself,
 * where binding 14 values a row from JavaScript cost about as much as the
 * B-tree work (issue 14). One statement for every record type, in the batch's
 * order (issue 46): one a type walked the batch's time range once per type,
 * each pass after the first inserting between the rows of the one before, so
 * that every row sought its place in the table and each index from the root,
 * where in order most rows go in after the B-tree's last (SQLite's append
 * path). Measured: ~0.4 µs an event less on request-shaped batches.
 */
import type Database from 'better-sqlite3';
import path from 'node:path';
import { EVENT_COLUMN_TABLE, type EventColumn } from '../../core/store/event-columns';
import { repoRoot } from '../../core/repo-root';
import { BATCH_COLUMNS } from '../ingest/batch-columns';
import type { EventBatch } from '../ingest/event-batch';

/** The SQLite extension that defines kreplay_batch, built by `make build`. */
export function batchExtensionPath(): string {
  return path.join(repoRoot(), 'build', 'kreplay-sqlite.so');
}

/*
 * What each events column is made of (`type` is the row's own).
 * kreplay_batch gives NULL for an id of 0 (ctx, target: none); ts is exact, the batch's base plus an
 * integer offset.
 */
const SOURCES: Record<string, string> = {
  ts: '@base + ts_offset',
  seq: '@seq + k',
  dur: 'dur',
  // the batch's service column carries the container's id above 2^32 (agent/ingest/batch-columns.ts)
  service: 'service & 4294967295',
  container: 'nullif(service >> 32, 0)',
  ctx: 'ctx',
  pid: 'pid',
  tid: 'tid',
  comm: 'comm',
  bytes: 'bytes',
  fd: 'handle',
  ret: 'result',
  syscall: 'kind',
  target: 'target',
  dev: 'handle',
  sector: 'result',
  op: 'kind',
  error: 'error',
  response_ns: 'response',
  request_key: 'response',
};

/** A column only some record types fill: the batch column it is, and those types. */
interface Pick {
  column: number;
  types: readonly number[];
}

/**
 * A column only some record types fill is NULL in the others' rows: kreplay_batch gives it as a
 * pick (`pickN`), told once a statement which batch column and which types, so the row's type is
 * read once a row, not once a column through `CASE type WHEN …` (issue 46).
 */
function picksOf(columns: readonly EventColumn[]): Pick[] {
  return columns.flatMap((c) => {
    if (c.of === 'all') return [];
    const column = BATCH_COLUMNS.findIndex((b) => b.sql === SOURCES[c.name]);
    if (column < 0)
      throw new Error(`events column ${c.name}: only a batch column can be filled by some types`);
    return [{ column, types: c.of }];
  });
}

/** Bytes a pick takes in kreplay_batch's picks argument (kreplay_batch.c's PICK_BYTES). */
const PICK_BYTES = 9;

/** The picks as kreplay_batch's last argument takes them: per pick its column, then its types' bits (64, little-endian). */
function picksBlob(picks: readonly Pick[]): string {
  const blob = Buffer.alloc(picks.length * PICK_BYTES);
  picks.forEach(({ column, types }, i) => {
    if (types.some((type) => type >= 64))
      throw new Error(`record types ${types.join(', ')}: a pick holds types 0-63`);
    blob[i * PICK_BYTES] = column;
    blob.writeBigUInt64LE(
      types.reduce((mask, type) => mask | (1n << BigInt(type)), 0n),
      i * PICK_BYTES + 1,
    );
  });
  return `x'${blob.toString('hex')}'`;
}

function valuesOf(columns: readonly EventColumn[]): string[] {
  let pick = 0;
  return columns.map((c) =>
    c.name === 'type' ? 'type' : c.of === 'all' ? SOURCES[c.name]! : `pick${pick++}`,
  );
}

function blob(column: ArrayBufferView & { BYTES_PER_ELEMENT: number }, start: number, end: number): Buffer {
  const width = column.BYTES_PER_ELEMENT;
  return Buffer.from(column.buffer, column.byteOffset + start * width, (end - start) * width);
}

export class EventInsert {
  private readonly insert: Database.Statement;

  constructor(db: Database.Database) {
    const columns: readonly EventColumn[] = EVENT_COLUMN_TABLE;
    const args = ['@types', ...BATCH_COLUMNS.map((c) => `@${c.field}`), picksBlob(picksOf(columns))];
    this.insert = db.prepare(
      `INSERT INTO events (${columns.map((c) => c.name).join(', ')}) ` +
        `SELECT ${valuesOf(columns).join(', ')} FROM kreplay_batch(${args.join(', ')})`,
    );
  }

  /** Loads the agent's extension (kreplay_batch, kreplay_rowbinary) into the connection, once per connection. */
  static prepareConnection(db: Database.Database): void {
    // its entry point, sqlite3_kreplaysqlite_init, is the one SQLite derives from the file name
    db.loadExtension(batchExtensionPath());
  }

  /** Inserts rows [start, end) of `batch` with consecutive seqs in the batch's order; returns the next seq. */
  run(batch: EventBatch, firstSeq: number, start = 0, end = batch.count): number {
    if (start === end) return firstSeq;
    const params: Record<string, unknown> = {
      base: batch.baseTs,
      seq: BigInt(firstSeq),
      types: blob(batch.type, start, end),
    };
    for (const { field } of BATCH_COLUMNS) params[field] = blob(batch[field], start, end);
    return firstSeq + this.insert.run(params).changes;
  }
}
