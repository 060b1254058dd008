/** Reads a node store's events with their names resolved, for end-to-end assertions. */
import Database from 'better-sqlite3';

export interface StoredEvent {
  type: number;
  ts: bigint;
  dur: number;
  pid: number;
  tid: number;
  bytes: number;
  fd: number | null;
  ret: number | null;
  syscall: number | null;
  dev: number | null;
  op: number | null;
  service: string;
  comm: string;
  txn: string | null;
  trace: string | null;
  /** enum kr_target_kind and the value, null when unknown */
  target_kind: number | null;
  target: string | null;
}

export function readStoredEvents(path: string, where = '1'): StoredEvent[] {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db
      .prepare(
        `SELECT e.type, e.ts, e.dur, e.pid, e.tid, e.bytes, e.fd, e.ret, e.syscall, e.dev, e.op,
                s.name AS service, m.name AS comm, c.transaction_id AS txn, c.trace_id AS trace,
                t.kind AS target_kind, t.value AS target
         FROM events e JOIN services s ON s.id = e.service JOIN comms m ON m.id = e.comm
         LEFT JOIN contexts c ON c.id = e.ctx LEFT JOIN targets t ON t.id = e.target
         WHERE ${where} ORDER BY e.ts, e.seq`,
      )
      .safeIntegers(true)
      .all() as Record<string, unknown>[];
    return rows.map((r) => {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(r)) out[k] = typeof v === 'bigint' && k !== 'ts' ? Number(v) : v;
      return out as unknown as StoredEvent;
    });
  } finally {
    db.close();
  }
}

export function countStored(path: string, where = '1'): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare(`SELECT count(*) AS n FROM events WHERE ${where}`).get() as { n: number }).n;
  } finally {
    db.close();
  }
}

/** The latest value of a run counter, 0 when never stored. */
export function storedCounter(path: string, name: string): number {
  const db = new Database(path, { readonly: true });
  try {
    const row = db.prepare('SELECT max(value) AS v FROM counters WHERE name = ?').get(name) as {
      v: number | null;
    };
    return row.v ?? 0;
  } finally {
    db.close();
  }
}

/** The writes a run counted as dropped, for every reason (the ring, a full disk, a store error). */
export function droppedWrites(path: string): number {
  return ['sys_write_dropped', 'disk_full_dropped', 'store_error_dropped'].reduce(
    (sum, name) => sum + storedCounter(path, name),
    0,
  );
}
