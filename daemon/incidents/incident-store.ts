/**
 * A read-only node store built from the events of incident files that share
 * one store id: the same schema (core/store/schema.ts), the same event ids
 * (the store id and each event's (ts, seq) are the original's), and the
 * incident's runs with their counters, so the node-store readers serve it
 * unchanged: search, lookups, replay and export.
 */
import { renameSync, rmSync } from 'node:fs';
import type Database from 'better-sqlite3';
import type { ApiEvent } from '../../core/model';
import { eventToRow, type RowNames } from '../../core/model/event-row';
import type { IncidentRun } from '../../core/incident';
import { EVENT_COLUMN_TABLE } from '../../core/store/event-columns';
import { contextKey } from '../../core/store/context-key';
import { readContextKeySeed } from '../../core/store/context-key-seed';
import { openWriteStore } from '../../core/store/schema';

const COLUMNS = EVENT_COLUMN_TABLE.map((c) => c.name);
const INSERT_EVENT = `INSERT OR IGNORE INTO events (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map((c) => `@${c}`).join(', ')})`;
const SOURCES_KEY = 'incident_sources';

/** One dictionary table: each name once, ids from 1. */
class Dictionary<K> {
  private readonly ids = new Map<string, number>();
  constructor(private readonly insert: (id: number, key: K) => void) {}
  id(text: string, key: K): number {
    let id = this.ids.get(text);
    if (id === undefined) {
      id = this.ids.size + 1;
      this.ids.set(text, id);
      this.insert(id, key);
    }
    return id;
  }
}

/** The sources (incident digests) a built store was made of, or null when it cannot be read. */
export function storeSources(db: Database.Database): string | null {
  const row = db.prepare('SELECT value FROM meta WHERE key = ?').get(SOURCES_KEY) as
    { value: string } | undefined;
  return row?.value ?? null;
}

export class IncidentStoreBuilder {
  private readonly db: Database.Database;
  private readonly names: RowNames;
  private readonly insertEvent: Database.Statement;
  private nextSeq = 1;

  /** Writes to `path`.partial; finish() renames it into place. */
  constructor(
    private readonly path: string,
    storeId: string,
    node: string,
    sources: string,
  ) {
    rmSync(`${path}.partial`, { force: true });
    this.db = openWriteStore(`${path}.partial`, node).db;
    const setMeta = this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)');
    setMeta.run('store_id', storeId);
    setMeta.run(SOURCES_KEY, sources);
    const services = this.db.prepare('INSERT INTO services (id, name) VALUES (?, ?)');
    const comms = this.db.prepare('INSERT INTO comms (id, name) VALUES (?, ?)');
    const contexts = this.db.prepare(
      'INSERT INTO contexts (id, transaction_id, trace_id, parent_span_id, transaction_key, trace_key) VALUES (?, ?, ?, ?, ?, ?)',
    );
    const seed = readContextKeySeed(this.db);
    const key = (id: string | null) => (id === null ? null : contextKey(id, seed));
    const targets = this.db.prepare('INSERT INTO targets (id, kind, value) VALUES (?, ?, ?)');
    const serviceIds = new Dictionary<string>((id, name) => services.run(id, name));
    const commIds = new Dictionary<string>((id, name) => comms.run(id, name));
    const contextIds = new Dictionary<[string | null, string | null, string | null]>(
      (id, [txn, trace, span]) => contexts.run(id, txn, trace, span, key(txn), key(trace)),
    );
    const targetIds = new Dictionary<[number, string]>((id, [kind, value]) => targets.run(id, kind, value));
    const containers = this.db.prepare('INSERT INTO containers (id, info) VALUES (?, ?)');
    const containerIds = new Dictionary<string>((id, info) => containers.run(id, info));
    this.names = {
      service: (name) => serviceIds.id(name, name),
      comm: (name) => commIds.id(name, name),
      context: (txn, trace, span) =>
        txn === null && trace === null
          ? null
          : contextIds.id(JSON.stringify([txn, trace, span]), [txn, trace, span]),
      target: (kind, value) => targetIds.id(`${kind}\0${value}`, [kind, value]),
      container: (info) => containerIds.id(info, info),
    };
    this.insertEvent = this.db.prepare(INSERT_EVENT);
    this.db.exec('BEGIN');
  }

  add(event: ApiEvent): void {
    const row = eventToRow(event as unknown as Record<string, unknown>, this.names, this.nextSeq);
    this.nextSeq = Math.max(this.nextSeq, Number(row.seq) + 1);
    this.insertEvent.run(row);
  }

  /** A run of the recording, with its counters' growth as two snapshots bracketing the incident. */
  addRun(run: IncidentRun): void {
    const { id } = this.db
      .prepare(
        `INSERT INTO runs (node, started_ns, stopped_ns, exit_reason, kernel, agent_version, attach_points, clock_offset_ns,
           clock_error_ns, start_reason, sample_background, filter) VALUES (?, ?, ?, ?, ?, ?, '[]', ?, ?, ?, ?, ?) RETURNING id`,
      )
      .get(
        run.node,
        run.started_ns,
        run.stopped_ns,
        run.exit_reason,
        run.kernel,
        run.agent_version,
        run.clock_offset_ns,
        run.clock_error_ns,
        run.start_reason,
        run.sample_background,
        run.filter === null ? null : JSON.stringify(run.filter),
      ) as { id: number };
    const counter = this.db.prepare(
      'INSERT OR REPLACE INTO counters (run_id, at_ns, name, value) VALUES (?, ?, ?, ?)',
    );
    for (const [name, value] of Object.entries(run.counters)) {
      if (run.counters_from_ns !== null) counter.run(id, run.counters_from_ns, name, 0);
      if (run.counters_to_ns !== null) counter.run(id, run.counters_to_ns, name, value);
    }
  }

  /** Commits, leaves a file readers open read-only (no WAL), and moves it into place. */
  finish(): void {
    this.db.prepare("UPDATE meta SET value = ? WHERE key = 'next_seq'").run(String(this.nextSeq));
    this.db.exec('COMMIT');
    this.db.pragma('journal_mode = DELETE');
    this.db.close();
    renameSync(`${this.path}.partial`, this.path);
  }

  abandon(): void {
    if (this.db.inTransaction) this.db.exec('ROLLBACK');
    this.db.close();
    rmSync(`${this.path}.partial`, { force: true });
  }
}
