/**
 * Reading the next batch to ship from a node store: events in commit (seq)
 * order from a cursor, dictionaries joined to strings, each written as the
 * JSONEachRow line of the fleet events table (the API's event JSON plus the
 * row's store id and seq; integers exact).
 */
import type Database from 'better-sqlite3';
import { eventToJson, rowToEvent, targetKindName, type StoreNames } from '../../core/model';
import type { EventRow } from '../../core/store/event-columns';
import type { StoreInfo } from '../../core/store/schema';

interface JoinedRow extends EventRow {
  service_name: string;
  comm_name: string;
  transaction_id: string | null;
  trace_id: string | null;
  target_kind: bigint | null;
  target_value: string | null;
}

const BATCH_SQL = `
  SELECT e.ts, e.seq, e.type, e.dur, e.service, e.ctx, e.pid, e.tid, e.comm, e.bytes, e.fd, e.ret,
         e.syscall, e.dev, e.sector, e.op, e.error, e.target,
         s.name AS service_name, m.name AS comm_name, c.transaction_id, c.trace_id,
         t.kind AS target_kind, t.value AS target_value
  FROM events e INDEXED BY events_by_seq
  JOIN services s ON s.id = e.service
  JOIN comms m ON m.id = e.comm
  LEFT JOIN contexts c ON c.id = e.ctx
  LEFT JOIN targets t ON t.id = e.target
  WHERE e.seq >= ? ORDER BY e.seq LIMIT ?`;

export interface ShipBatch {
  rows: string;
  count: number;
  /** the cursor once this batch is acknowledged */
  nextSeq: number;
  /** timestamp of the batch's first event: how far behind the shipper is */
  firstTs: bigint | null;
}

export class ShipBatchReader {
  private readonly select: Database.Statement<[number, number], JoinedRow>;

  constructor(
    db: Database.Database,
    private readonly info: StoreInfo,
  ) {
    this.select = db.prepare<[number, number], JoinedRow>(BATCH_SQL).safeIntegers(true);
  }

  read(fromSeq: number, limit: number): ShipBatch {
    const rows = this.select.all(fromSeq, limit);
    let current = rows[0]!;
    // the joined strings of the row being converted: rowToEvent asks for them by id
    const names: StoreNames = {
      storeId: this.info.storeId,
      node: this.info.node,
      service: () => current.service_name,
      comm: () => current.comm_name,
      context: () => ({ transaction_id: current.transaction_id, trace_id: current.trace_id }),
      target: () =>
        current.target_value === null
          ? null
          : { kind: targetKindName(Number(current.target_kind)), value: current.target_value },
    };
    let text = '';
    for (const row of rows) {
      current = row;
      text +=
        eventToJson(rowToEvent(row, names), false, { store_id: this.info.storeId, seq: row.seq }) + '\n';
    }
    const last = rows.at(-1);
    return {
      rows: text,
      count: rows.length,
      nextSeq: last ? Number(last.seq) + 1 : fromSeq,
      firstTs: rows[0]?.ts ?? null,
    };
  }
}
