/**
 * Multi-row INSERTs of one event type: per-statement overhead is paid once
 * per ROWS_PER_STATEMENT rows, the remainder goes row by row.
 */
import type Database from 'better-sqlite3';
import { RecordType } from '../../core/model';
import type { EventBatch } from '../ingest/event-batch';

const ROWS_PER_STATEMENT = 64;

interface TypeShape {
  /** type-specific columns after the common ones */
  columns: string;
  extraParams: number;
}

const COMMON_COLUMNS = 'ts, seq, type, dur, service, ctx, pid, tid, comm, bytes';
const COMMON_PARAMS = 9; // ts offset, seq, dur, service, ctx, pid, tid, comm, bytes

const SHAPES: Record<number, TypeShape> = {
  [RecordType.SysWrite]: { columns: 'fd, ret, syscall, target', extraParams: 4 },
  [RecordType.BlockIo]: { columns: 'dev, sector, op, error', extraParams: 4 },
};

export class EventInsert {
  private readonly many: Database.Statement;
  private readonly one: Database.Statement;
  private readonly perRow: number;
  private readonly params: (number | null)[];

  constructor(
    db: Database.Database,
    private readonly type: number,
  ) {
    const shape = SHAPES[type];
    if (!shape) throw new RangeError(`no insert shape for record type ${type}`);
    this.perRow = COMMON_PARAMS + shape.extraParams;
    // Numbers bind as REAL in better-sqlite3; the CAST keeps base + offset an exact integer.
    const row = `(@base + CAST(? AS INTEGER), ?, ${type}${', ?'.repeat(this.perRow - 2)})`;
    const prefix = `INSERT INTO events (${COMMON_COLUMNS}, ${shape.columns}) VALUES `;
    this.many = db.prepare(prefix + Array(ROWS_PER_STATEMENT).fill(row).join(','));
    this.one = db.prepare(prefix + row);
    this.params = new Array(ROWS_PER_STATEMENT * this.perRow);
  }

  /** Inserts the rows of `batch` of this type with consecutive seqs; returns the next seq. */
  run(batch: EventBatch, firstSeq: number): number {
    const { params: p, perRow, type } = this;
    const base = { base: batch.baseTs };
    const isBlock = type === RecordType.BlockIo;
    let seq = firstSeq;
    let filled = 0;
    for (let i = 0; i < batch.count; i++) {
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
