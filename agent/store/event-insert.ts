/**
 * Multi-row INSERTs of one event type: per-statement overhead is paid once
 * per ROWS_PER_STATEMENT rows, the remainder goes row by row.
 */
import type Database from 'better-sqlite3';
import { RecordType } from '../../core/model';
import { columnsOf } from '../../core/store/event-columns';
import type { EventBatch } from '../ingest/event-batch';

const ROWS_PER_STATEMENT = 64;

/*
 * The columns come from the column table; `type` is a literal of the
 * statement, so a row takes one parameter fewer. run() fills them in table
 * order: ts offset, seq, dur, service, ctx, pid, tid, comm, bytes, then the
 * batch's handle, result, kind and error (block I/O) or target (writes).
 */
const COMMON_COLUMNS = columnsOf('all');
const TYPES = [RecordType.SysWrite, RecordType.BlockIo] as const;

export class EventInsert {
  private readonly many: Database.Statement;
  private readonly one: Database.Statement;
  private readonly perRow: number;
  private readonly params: (number | null)[];

  constructor(
    db: Database.Database,
    private readonly type: number,
  ) {
    const shapeType = TYPES.find((t) => t === type);
    if (shapeType === undefined) throw new RangeError(`no insert shape for record type ${type}`);
    const columns = [...COMMON_COLUMNS, ...columnsOf(shapeType)];
    this.perRow = columns.length - 1;
    // Numbers bind as REAL in better-sqlite3; the CAST keeps base + offset an exact integer.
    const row = `(@base + CAST(? AS INTEGER), ?, ${type}${', ?'.repeat(this.perRow - 2)})`;
    const prefix = `INSERT INTO events (${columns.join(', ')}) VALUES `;
    this.many = db.prepare(prefix + Array(ROWS_PER_STATEMENT).fill(row).join(','));
    this.one = db.prepare(prefix + row);
    this.params = new Array(ROWS_PER_STATEMENT * this.perRow);
  }

  /** Inserts rows [start, end) of `batch` of this type with consecutive seqs; returns the next seq. */
  run(batch: EventBatch, firstSeq: number, start = 0, end = batch.count): number {
    const { params: p, perRow, type } = this;
    const base = { base: batch.baseTs };
    const isBlock = type === RecordType.BlockIo;
    let seq = firstSeq;
    let filled = 0;
    for (let i = start; i < end; i++) {
      if (batch.type[i] !== type) continue;
      const o = filled * perRow;
      p[o] = batch.tsOffset[i]!;
      p[o + 1] = seq++;
      p[o + 2] = batch.dur[i]!;
      p[o + 3] = batch.service[i]!;
      p[o + 4] = batch.ctx[i] === 0 ? null : batch.ctx[i]!;
      p[o + 5] = batch.pid[i]!;
      p[o + 6] = batch.tid[i]!;
      p[o + 7] = batch.comm[i]!;
      p[o + 8] = batch.bytes[i]!;
      p[o + 9] = batch.handle[i]!;
      p[o + 10] = batch.result[i]!;
      p[o + 11] = batch.kind[i]!;
      // the 13th column: error of a block request, target of a write (NULL when unknown)
      p[o + 12] = isBlock ? batch.error[i]! : batch.target[i] === 0 ? null : batch.target[i]!;
      if (++filled === ROWS_PER_STATEMENT) {
        this.many.run(p, base);
        filled = 0;
      }
    }
    for (let r = 0; r < filled; r++) this.one.run(p.slice(r * perRow, (r + 1) * perRow), base);
    return seq;
  }
}
