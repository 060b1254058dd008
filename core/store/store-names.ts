/**
 * A store's dictionaries in memory. The writer commits new names in the same
 * transaction as the first events that use them, so a miss means "added
 * since we last looked": reload then. Services and comms are few and kept
 * whole; contexts grow with every transaction and targets with every file
 * written, so only a bounded set of recently used ones is kept.
 */
import type Database from 'better-sqlite3';
import { PARENT_SPAN_SCHEMA_VERSION, schemaVersionOf, type StoreInfo } from './schema';
import {
  parseContainer,
  targetKindName,
  type Container,
  type StoreContext,
  type StoreNames,
  type Target,
} from '../model';

type Context = StoreContext;

const NO_CONTEXT: Context = { transaction_id: null, trace_id: null, parent_span_id: null, trace_flags: null };
const MAX_CACHED_CONTEXTS = 65536;
const MAX_CACHED_TARGETS = 65536;
const MAX_CACHED_CONTAINERS = 4096;

/**
 * id -> value of a growing dictionary table, at most `max` kept: the values used in the newest
 * generation of `max / 2` loads and in the one before it (a value used again moves to the newest).
 * Not one Map that drops its oldest entry at each load past `max`: each drop leaves a deleted entry
 * at the Map's front, which the next look for the oldest steps over, ~30 µs a load once 65,536
 * are kept.
 */
export class BoundedCache<V> {
  private newer = new Map<number, V>();
  private older = new Map<number, V>();

  constructor(
    private readonly max: number,
    private readonly load: (id: number) => V,
  ) {}

  get(id: number): V {
    let value = this.newer.get(id);
    if (value !== undefined) return value;
    value = this.older.get(id);
    if (value === undefined) value = this.load(id);
    if (this.newer.size >= this.max / 2) {
      this.older = this.newer;
      this.newer = new Map();
    }
    this.newer.set(id, value);
    return value;
  }
}

/** services or comms: ids only grow, so a reload reads the ids above the largest known. */
class NameTable {
  private readonly names = new Map<number, string>();
  private readonly ids = new Map<string, number>();
  private maxId = 0;
  private readonly since: Database.Statement<[number], { id: number; name: string }>;

  constructor(db: Database.Database, table: 'services' | 'comms') {
    this.since = db.prepare(`SELECT id, name FROM ${table} WHERE id > ? ORDER BY id`);
    this.reload();
  }

  private reload(): void {
    for (const { id, name } of this.since.all(this.maxId)) {
      this.names.set(id, name);
      this.ids.set(name, id);
      this.maxId = id;
    }
  }

  name(id: number): string {
    if (!this.names.has(id)) this.reload();
    return this.names.get(id) ?? `#${id}`;
  }

  id(name: string): number | undefined {
    if (!this.ids.has(name)) this.reload();
    return this.ids.get(name);
  }
}

export class StoreNameCache implements StoreNames {
  readonly storeId: string;
  readonly node: string;
  private readonly services: NameTable;
  private readonly comms: NameTable;
  private readonly contexts: BoundedCache<Context>;
  private readonly targets: BoundedCache<Target | null>;
  private readonly containers: BoundedCache<Container | null>;

  constructor(db: Database.Database, info: StoreInfo) {
    this.storeId = info.storeId;
    this.node = info.node;
    this.services = new NameTable(db, 'services');
    this.comms = new NameTable(db, 'comms');
    // a store older than v8 has no parent_span_id until the agent upgrades it: asked at each miss until then
    let withSpan: Database.Statement<[number], Context> | undefined;
    let withoutSpan: Database.Statement<[number], Context> | undefined;
    this.contexts = new BoundedCache(MAX_CACHED_CONTEXTS, (id) => {
      if (!withSpan && schemaVersionOf(db) >= PARENT_SPAN_SCHEMA_VERSION)
        withSpan = db.prepare(
          'SELECT transaction_id, trace_id, parent_span_id, trace_flags FROM contexts WHERE id = ?',
        );
      const byId =
        withSpan ??
        (withoutSpan ??= db.prepare(
          'SELECT transaction_id, trace_id, NULL AS parent_span_id, NULL AS trace_flags FROM contexts WHERE id = ?',
        ));
      return byId.get(id) ?? NO_CONTEXT;
    });
    // prepared at the first target: a store of schema v1 has no targets table (and no target ids)
    let targetById: Database.Statement<[number], { kind: number; value: string }> | undefined;
    this.targets = new BoundedCache(MAX_CACHED_TARGETS, (id) => {
      targetById ??= db.prepare('SELECT kind, value FROM targets WHERE id = ?');
      const row = targetById.get(id);
      return row ? { kind: targetKindName(row.kind), value: row.value } : null;
    });
    // prepared at the first container: only a store of schema v9 on has container ids
    let containerById: Database.Statement<[number], { info: string }> | undefined;
    this.containers = new BoundedCache(MAX_CACHED_CONTAINERS, (id) => {
      containerById ??= db.prepare('SELECT info FROM containers WHERE id = ?');
      const row = containerById.get(id);
      return row ? parseContainer(row.info) : null;
    });
  }

  service(id: number): string {
    return this.services.name(id);
  }

  comm(id: number): string {
    return this.comms.name(id);
  }

  serviceId(name: string): number | undefined {
    return this.services.id(name);
  }

  context(id: number | null): Context {
    return id === null ? NO_CONTEXT : this.contexts.get(id);
  }

  target(id: number | null): Target | null {
    return id === null ? null : this.targets.get(id);
  }

  container(id: number | null): Container | null {
    return id === null ? null : this.containers.get(id);
  }
}
