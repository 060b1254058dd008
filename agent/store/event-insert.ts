/**
 * The events of one record type go in with one `INSERT ... SELECT` per
 * transaction from kreplay_batch (native/sqlite/kreplay_batch.c), a
 * table-valued function over the batch's columns bound as blobs: SQLite
 * reads the typed arrays itself, where binding 14 values a row from
 * JavaScript cost about as much as the B-tree work (issue 14).
 */
import type Database from 'better-sqlite3';
import path from 'node:path';
import { RecordType, SYSCALL_RECORD_TYPES } from '../../core/model';
import { columnsOf } from '../../core/store/event-columns';
import { repoRoot } from '../../core/repo-root';
import { BATCH_COLUMNS } from '../ingest/batch-columns';
import type { EventBatch } from '../ingest/event-batch';

/** The SQLite extension that defines kreplay_batch, built by `make build`. */
export function batchExtensionPath(): string {
  return path.join(repoRoot(), 'build', 'kreplay-sqlite.so');
}

/*
 * What each events column is made of, per record type; `type` is a literal of the statement.
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
const COMMON_COLUMNS = columnsOf('all');
const TYPES = [...SYSCALL_RECORD_TYPES, RecordType.BlockIo] as const;

function blob(column: ArrayBufferView & { BYTES_PER_ELEMENT: number }, start: number, end: number): Buffer {
  const width = column.BYTES_PER_ELEMENT;
  return Buffer.from(column.buffer, column.byteOffset + start * width, (end - start) * width);
}

export class EventInsert {
  private readonly insert: Database.Statement;

  constructor(
    db: Database.Database,
    private readonly type: number,
  ) {
    const shapeType = TYPES.find((t) => t === type);
    if (shapeType === undefined) throw new RangeError(`no insert shape for record type ${type}`);
    const columns = [...COMMON_COLUMNS, ...columnsOf(shapeType)];
    const values = columns.map((c) => (c === 'type' ? String(type) : SOURCES[c]!));
    const args = ['@row_type', '@types', ...BATCH_COLUMNS.map((c) => `@${c.field}`)];
    this.insert = db.prepare(
      `INSERT INTO events (${columns.join(', ')}) SELECT ${values.join(', ')} FROM kreplay_batch(${args.join(', ')})`,
    );
  }

  /** Loads the agent's extension (kreplay_batch, kreplay_rowbinary) into the connection, once per connection. */
  static prepareConnection(db: Database.Database): void {
    // its entry point, sqlite3_kreplaysqlite_init, is the one SQLite derives from the file name
    db.loadExtension(batchExtensionPath());
  }

  /** Inserts rows [start, end) of `batch` of this type with consecutive seqs; returns the next seq. */
  run(batch: EventBatch, firstSeq: number, start = 0, end = batch.count): number {
    // a type none of the rows has costs no statement (each would bind and copy every column)
    if (!batch.type.subarray(start, end).includes(this.type)) return firstSeq;
    const params: Record<string, unknown> = {
      base: batch.baseTs,
      seq: BigInt(firstSeq),
      row_type: this.type,
      types: blob(batch.type, start, end),
    };
    for (const { field } of BATCH_COLUMNS) params[field] = blob(batch[field], start, end);
    return firstSeq + this.insert.run(params).changes;
  }
}
