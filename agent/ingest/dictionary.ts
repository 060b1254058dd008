/**
 * Integer ids for the strings events repeat (service names, comms,
 * contexts, write targets, containers as their JSON). The decoder assigns ids in memory as it meets
 * the strings; the store's one writer persists new entries in the same
 * transaction as the first batch that uses them, so a reader never sees an
 * event whose name is missing.
 */
export type NameEntry = [id: number, name: string];
/** parentSpanId and traceFlags: a W3C traceparent's parent-id and flags, null for a marker's context */
export type ContextEntry = [
  id: number,
  transactionId: string | null,
  traceId: string | null,
  parentSpanId: string | null,
  traceFlags: number | null,
];
/** kind: enum kr_target_kind */
export type TargetEntry = [id: number, kind: number, value: string];

export interface NewNames {
  services: NameEntry[];
  comms: NameEntry[];
  contexts: ContextEntry[];
  targets: TargetEntry[];
  /** [id, the container's JSON (core/model/container.ts)] */
  containers: NameEntry[];
}

export class NameDictionary {
  private readonly ids = new Map<string, number>();
  private nextId = 1;
  private pending: NameEntry[] = [];

  constructor(entries: NameEntry[]) {
    for (const [id, name] of entries) {
      this.ids.set(name, id);
      this.nextId = Math.max(this.nextId, id + 1);
    }
  }

  id(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.nextId++;
      this.ids.set(name, id);
      this.pending.push([id, name]);
    }
    return id;
  }

  entries(): NameEntry[] {
    return [...this.ids].map(([name, id]) => [id, name]);
  }

  takePending(): NameEntry[] {
    const taken = this.pending;
    this.pending = [];
    return taken;
  }
}

/** Contexts the decoder remembers at most: beyond half of it, those unused for longest are forgotten. */
export const MAX_REMEMBERED_CONTEXTS = 262144;

/**
 * (transaction_id, trace_id, parent span, trace flags) tuples; id 0 stands for "no context". Two
 * requests of one trace (a retry, two services of one node) differ by their traceparent's span, so
 * an OTLP export knows each event's parent. Contexts
 * grow with every transaction, so memory holds only the recently used ones:
 * a pair seen again after it was forgotten gets a fresh id and row (the
 * store allows several rows per pair; readers look contexts up by value).
 */
export class ContextDictionary {
  /*
   * Two generations instead of one Map in recency order: evicting a Map's oldest key through
   * keys().next() walks the holes its deletions left (V8 compacts a Map only when it grows), 70 to
   * 190 µs a new context once full (issue 46). A context used again moves to the young generation;
   * when it holds half the capacity, the old one (unused since) is forgotten whole.
   */
  private ids = new Map<string, number>();
  private old = new Map<string, number>();
  private nextId: number;
  private pending: ContextEntry[] = [];

  constructor(
    entries: ContextEntry[],
    firstFreeId = 1,
    private readonly capacity = MAX_REMEMBERED_CONTEXTS,
  ) {
    this.nextId = firstFreeId;
    for (const [id, txn, trace, span, flags] of entries) {
      // several rows of one pair: the last one read is the one used
      const key = ContextDictionary.key(txn, trace, span, flags);
      if (this.ids.has(key)) this.ids.set(key, id);
      else {
        this.old.delete(key);
        this.remember(key, id);
      }
      this.nextId = Math.max(this.nextId, id + 1);
    }
  }

  /* Values never contain a space (see the marker grammar), so this key is unambiguous. */
  private static key(
    txn: string | null,
    trace: string | null,
    span: string | null,
    flags: number | null,
  ): string {
    return span === null
      ? `${txn ?? ''} ${trace ?? ''}`
      : `${txn ?? ''} ${trace ?? ''} ${span} ${flags ?? ''}`;
  }

  /* A key the young generation does not hold goes into it (past half the capacity, into a new one). */
  private remember(key: string, id: number): void {
    if (this.ids.size >= this.capacity / 2) {
      this.old = this.ids;
      this.ids = new Map();
    }
    this.ids.set(key, id);
  }

  id(
    transactionId: string | null,
    traceId: string | null,
    parentSpanId: string | null = null,
    traceFlags: number | null = null,
  ): number {
    if (transactionId === null && traceId === null) return 0;
    const key = ContextDictionary.key(transactionId, traceId, parentSpanId, traceFlags);
    // per event batch's context: one hash lookup when young, the fewest otherwise (issue 46)
    let id = this.ids.get(key);
    if (id !== undefined) return id;
    id = this.old.get(key);
    if (id === undefined) {
      id = this.nextId++;
      this.pending.push([id, transactionId, traceId, parentSpanId, traceFlags]);
    } else this.old.delete(key);
    this.remember(key, id);
    return id;
  }

  /** Forgets contexts the store removed, so they are never referenced again. */
  forget(entries: ContextEntry[]): void {
    for (const [id, txn, trace, span, flags] of entries) {
      const key = ContextDictionary.key(txn, trace, span, flags);
      for (const generation of [this.ids, this.old]) if (generation.get(key) === id) generation.delete(key);
    }
  }

  get size(): number {
    return this.ids.size + this.old.size;
  }

  takePending(): ContextEntry[] {
    const taken = this.pending;
    this.pending = [];
    return taken;
  }
}

/** (kind, value) pairs of write targets; a value may be a path of one kind and later of another. */
export class TargetDictionary {
  private readonly names: NameDictionary;

  constructor(entries: TargetEntry[]) {
    this.names = new NameDictionary(entries.map(([id, kind, value]) => [id, `${kind}:${value}`]));
  }

  private static entry([id, key]: NameEntry): TargetEntry {
    const colon = key.indexOf(':');
    return [id, Number(key.slice(0, colon)), key.slice(colon + 1)];
  }

  id(kind: number, value: string): number {
    return this.names.id(`${kind}:${value}`);
  }

  entries(): TargetEntry[] {
    return this.names.entries().map(TargetDictionary.entry);
  }

  takePending(): TargetEntry[] {
    return this.names.takePending().map(TargetDictionary.entry);
  }
}

/** The dictionaries a decoder fills. */
export interface Dictionaries {
  services: NameDictionary;
  comms: NameDictionary;
  contexts: ContextDictionary;
  targets: TargetDictionary;
  containers: NameDictionary;
}

export function takeNewNames(d: Dictionaries): NewNames {
  return {
    services: d.services.takePending(),
    comms: d.comms.takePending(),
    contexts: d.contexts.takePending(),
    targets: d.targets.takePending(),
    containers: d.containers.takePending(),
  };
}

export function countNewNames(names: NewNames): number {
  return (
    names.services.length +
    names.comms.length +
    names.contexts.length +
    names.targets.length +
    names.containers.length
  );
}
