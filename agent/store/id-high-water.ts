/**
 * The first id no row of a dictionary table ever had, kept in meta. Retention removes contexts and
 * targets with their last events, the highest too; new ids started above the highest row left
 * would give a removed id to another context or target, and a reader's cache of names by id (the
 * daemon's, for as long as it runs) would name the new one's events by the old one.
 */
import type Database from 'better-sqlite3';

export class IdHighWater {
  /** where new ids started when the store was opened */
  readonly firstFree: number;
  private next: number;
  /* as the transaction being committed leaves it */
  private pending: number;
  private readonly store: Database.Statement<[string]>;

  constructor(db: Database.Database, table: 'contexts' | 'targets', metaKey: string) {
    this.next = this.pending = IdHighWater.firstFree(db, table, metaKey);
    this.firstFree = this.next;
    this.store = db.prepare(`INSERT OR REPLACE INTO meta (key, value) VALUES ('${metaKey}', ?)`);
  }

  /** Where new ids start: above every id a row ever had. */
  static firstFree(db: Database.Database, table: 'contexts' | 'targets', metaKey: string): number {
    const kept = db.prepare(`SELECT value FROM meta WHERE key = ?`).pluck().get(metaKey) as
      string | undefined;
    const max = db.prepare(`SELECT max(id) FROM ${table}`).pluck().get() as number | null;
    return Math.max(Number(kept ?? 1), (max ?? 0) + 1);
  }

  /** Inside the transaction that writes rows with these ids. */
  wrote(ids: Iterable<number>): void {
    let next = this.next;
    for (const id of ids) if (id >= next) next = id + 1;
    if (next > this.next) this.store.run(String(next));
    this.pending = next;
  }

  /** The transaction committed. */
  committed(): void {
    this.next = this.pending;
  }
}
