/** Integer ids for the strings events repeat (service names, comms, contexts). */
import type Database from 'better-sqlite3';

export class NameDictionary {
  private readonly ids = new Map<string, number>();
  private readonly insert: Database.Statement<[string], { id: number }>;

  constructor(db: Database.Database, table: 'services' | 'comms') {
    for (const row of db.prepare(`SELECT id, name FROM ${table}`).all() as { id: number; name: string }[]) {
      this.ids.set(row.name, row.id);
    }
    this.insert = db.prepare(
      `INSERT INTO ${table} (name) VALUES (?) ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id`,
    );
  }

  id(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.insert.get(name)!.id;
      this.ids.set(name, id);
    }
    return id;
  }
}

interface ContextParams {
  txn: string | null;
  trace: string | null;
}

/** Store ids of (transaction_id, trace_id) pairs; 0 stands for "no context". */
export class ContextDictionary {
  private readonly ids = new Map<string, number>();
  private readonly find: Database.Statement<[ContextParams], { id: number }>;
  private readonly insert: Database.Statement<[string | null, string | null], { id: number }>;

  constructor(db: Database.Database) {
    this.find = db.prepare(
      `SELECT id FROM contexts WHERE coalesce(transaction_id, '') = coalesce(@txn, '') AND coalesce(trace_id, '') = coalesce(@trace, '')`,
    );
    this.insert = db.prepare('INSERT INTO contexts (transaction_id, trace_id) VALUES (?, ?) RETURNING id');
  }

  id(transactionId: string | null, traceId: string | null): number {
    if (transactionId === null && traceId === null) return 0;
    // Values never contain a space (see the marker grammar), so this key is unambiguous.
    const key = `${transactionId ?? ''} ${traceId ?? ''}`;
    let id = this.ids.get(key);
    if (id === undefined) {
      id = (this.find.get({ txn: transactionId, trace: traceId }) ?? this.insert.get(transactionId, traceId)!).id;
      this.ids.set(key, id);
    }
    return id;
  }
}
