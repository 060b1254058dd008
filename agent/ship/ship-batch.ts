/**
 * Reading the next batch to ship from a node store: events in commit (seq)
 * order from a cursor, encoded as ClickHouse RowBinary inside SQLite by one
 * statement (agent/ship/ship-sql.ts), so no row crosses into JavaScript.
 */
import type Database from 'better-sqlite3';
import type { StoreInfo } from '../../core/store/schema';
import { EventInsert } from '../store/event-insert';
import { shipSql, type ShipSql } from './ship-sql';
import { CLICKHOUSE_EVENT_COLUMNS, type ClickHouseColumn } from '../../core/clickhouse/schema';
import type { EncodedRows, InsertCodec } from '../../core/clickhouse/http-client';

export interface ShipBatch {
  /** the rows as RowBinary, in the column order of `insert`, in the reader's codec */
  rows: EncodedRows;
  count: number;
  /** the cursor once this batch is acknowledged */
  nextSeq: number;
}

interface BatchRow {
  rowbinary: Buffer;
  count: number;
  last_seq: number | null;
}

export class ShipBatchReader {
  private readonly select: Database.Statement<[Record<string, unknown>], BatchRow>;
  private readonly firstSeqFrom: Database.Statement<[number], number | undefined>;
  private readonly sql: ShipSql;

  constructor(
    db: Database.Database,
    private readonly info: StoreInfo,
    /** the ClickHouse columns to fill (default: all; a test fills an older schema's) */
    columns: readonly ClickHouseColumn[] = CLICKHOUSE_EVENT_COLUMNS,
    /** `lz4` framed here, natively; `gzip` compressed by the HTTP client */
    private readonly codec: InsertCodec = 'none',
  ) {
    this.sql = shipSql(columns, codec);
    // kreplay_rowbinary lives in the agent's SQLite extension
    EventInsert.prepareConnection(db);
    this.select = db.prepare<[Record<string, unknown>], BatchRow>(this.sql.batch);
    this.firstSeqFrom = db
      .prepare<[number], number | undefined>(
        'SELECT seq FROM events INDEXED BY events_by_seq WHERE seq >= ? ORDER BY seq LIMIT 1',
      )
      .pluck();
  }

  /** The INSERT statement that takes `rows` into `table`. */
  insert(table: string): string {
    return this.sql.insert(table);
  }

  /**
   * The committed events of seqs [fromSeq, fromSeq + limit): at most `limit`. Seqs below the newest
   * committed one never appear later, so the cursor may move past gaps (rows retention removed); a
   * range that is all gap is skipped to the next event.
   */
  read(fromSeq: number, limit: number): ShipBatch {
    const params = { store_id: this.info.storeId, node: this.info.node, from: fromSeq, to: fromSeq + limit };
    let row = this.select.get(params)!;
    if (row.count === 0) {
      const next = this.firstSeqFrom.get(fromSeq);
      if (next === undefined) return { rows: this.rows(row), count: 0, nextSeq: fromSeq };
      row = this.select.get({ ...params, from: next, to: next + limit })!;
    }
    return { rows: this.rows(row), count: row.count, nextSeq: row.last_seq! + 1 };
  }

  private rows(row: BatchRow): EncodedRows {
    return { codec: this.codec, bytes: row.rowbinary };
  }
}
