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
/**
 * kind: enum kr_target_kind; the latest ts of an event without a context, and with one, that used
 * the target in the batch it comes with (null: none)
 */
export type TargetEntry = [
  id: number,
  kind: number,
  /* null: the decoder forgot it, the store row may be gone (agent/store/store-writer.ts) */
  value: string | null,
  lastBackgroundNs: bigint | null,
  lastContextNs: bigint | null,
];

/**
 * A context's four fields as the decoder's resolutions hold them (absent span and flags: null). The
 * dictionary remembers the object it is given, not a copy: a tuple of its own cost 88 bytes a new
 * context, kept as long as the context and copied by each scavenge it survives (issue 46).
 */
export interface ContextFields {
  readonly transactionId: string | null;
  readonly traceId: string | null;
  readonly parentSpanId?: string | null;
  readonly traceFlags?: number | null;
}

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

/* FNV-1a's prime: each character (and each field's end) multiplied in */
const FNV_PRIME = 0x01000193;
/* the slots a lookup probes at most: past them a tuple is taken as not remembered (a fresh id, never a wrong one) */
const MAX_PROBES = 32;
/* a slot whose entry was removed: lookups probe past it, inserts leave it until the table is cleared */
const REMOVED = -1;

function hashText(h: number, text: string | null): number {
  if (text !== null) for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  // a field's end (or its absence) is mixed in, so ("ab", "c") and ("a", "bc") differ
  return Math.imul(h ^ (text === null ? 0x100 : text.length + 0x200), FNV_PRIME);
}

function sameContext(
  e: ContextFields,
  txn: string | null,
  trace: string | null,
  span: string | null,
  flags: number | null,
): boolean {
  return (
    e.transactionId === txn &&
    e.traceId === trace &&
    (e.parentSpanId ?? null) === span &&
    (e.traceFlags ?? null) === flags
  );
}

/*
 * One generation of remembered contexts: an open-addressed table (linear probing, at most half
 * full) over typed arrays. A Map keyed by a string of the four fields cost ~2 µs a new context at
 * 2^17 entries (its growth, its rehashes, the key strings kept, the old generation's table left to
 * the GC at each turn; issue 46): these arrays are allocated once and cleared in place.
 */
class ContextTable {
  /* each slot's store id: 0 empty, REMOVED, else the id of entries[slot] */
  private readonly ids: Float64Array;
  private readonly hashes: Int32Array;
  private readonly entries: (ContextFields | undefined)[];
  private readonly mask: number;
  /* slots not empty (live or REMOVED): the table turns over when they reach half */
  used = 0;
  live = 0;

  constructor(readonly limit: number) {
    const slots = 2 ** Math.ceil(Math.log2(Math.max(2, limit) * 2));
    this.ids = new Float64Array(slots);
    this.hashes = new Int32Array(slots);
    this.entries = new Array<ContextFields | undefined>(slots).fill(undefined);
    this.mask = slots - 1;
  }

  get full(): boolean {
    return this.used >= this.limit;
  }

  /** The slot holding the tuple, -1 when it holds none (or none within MAX_PROBES). */
  find(
    hash: number,
    txn: string | null,
    trace: string | null,
    span: string | null,
    flags: number | null,
  ): number {
    for (let n = 0, slot = hash & this.mask; n < MAX_PROBES; n++, slot = (slot + 1) & this.mask) {
      const id = this.ids[slot]!;
      if (id === 0) return -1;
      if (
        id !== REMOVED &&
        this.hashes[slot] === hash &&
        sameContext(this.entries[slot]!, txn, trace, span, flags)
      )
        return slot;
    }
    return -1;
  }

  idAt(slot: number): number {
    return this.ids[slot]!;
  }

  fieldsAt(slot: number): ContextFields {
    return this.entries[slot]!;
  }

  /** Remembers the context unless its run of slots is past MAX_PROBES long (then it goes unremembered). */
  insert(hash: number, id: number, fields: ContextFields): void {
    for (let n = 0, slot = hash & this.mask; n < MAX_PROBES; n++, slot = (slot + 1) & this.mask) {
      if (this.ids[slot] !== 0) continue;
      this.ids[slot] = id;
      this.hashes[slot] = hash;
      this.entries[slot] = fields;
      this.used++;
      this.live++;
      return;
    }
  }

  remove(slot: number): void {
    this.ids[slot] = REMOVED;
    this.entries[slot] = undefined;
    this.live--;
  }

  clear(): void {
    this.ids.fill(0);
    this.entries.fill(undefined);
    this.used = 0;
    this.live = 0;
  }
}

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
   * Two generations instead of one table in recency order: a context used again moves to the young
   * generation; when it holds half the capacity, the old one (unused since) is forgotten whole.
   */
  private young: ContextTable;
  private old: ContextTable;
  /* the hash's start, per dictionary: tuples that collide in one agent do not in another */
  private readonly seed = (Math.random() * 0x1_0000_0000) | 0;
  private nextId: number;
  private pending: ContextEntry[] = [];

  constructor(entries: ContextEntry[], firstFreeId = 1, capacity = MAX_REMEMBERED_CONTEXTS) {
    this.young = new ContextTable(capacity / 2);
    this.old = new ContextTable(capacity / 2);
    this.nextId = firstFreeId;
    for (const entry of entries) {
      // several rows of one pair: the last one read is the one used
      const [id, txn, trace, span, flags] = entry;
      const hash = this.hash(txn, trace, span, flags);
      const slot = this.young.find(hash, txn, trace, span, flags);
      if (slot !== -1) this.young.remove(slot);
      else {
        const old = this.old.find(hash, txn, trace, span, flags);
        if (old !== -1) this.old.remove(old);
      }
      this.remember(hash, id, { transactionId: txn, traceId: trace, parentSpanId: span, traceFlags: flags });
      this.nextId = Math.max(this.nextId, id + 1);
    }
  }

  private hash(txn: string | null, trace: string | null, span: string | null, flags: number | null): number {
    const h = hashText(hashText(hashText(this.seed, txn), trace), span);
    return Math.imul(h ^ (flags === null ? 0x100 : flags), FNV_PRIME);
  }

  /* An entry the young generation does not hold goes into it (past half the capacity, into a new one). */
  private remember(hash: number, id: number, fields: ContextFields): void {
    if (this.young.full) {
      const young = this.old;
      young.clear();
      this.old = this.young;
      this.young = young;
    }
    this.young.insert(hash, id, fields);
  }

  id(
    transactionId: string | null,
    traceId: string | null,
    parentSpanId: string | null = null,
    traceFlags: number | null = null,
  ): number {
    return this.idOf({ transactionId, traceId, parentSpanId, traceFlags });
  }

  /** The context's id; a new context is remembered as this object, whose four fields must not change. */
  idOf(context: ContextFields): number {
    const { transactionId, traceId } = context;
    if (transactionId === null && traceId === null) return 0;
    const parentSpanId = context.parentSpanId ?? null;
    const traceFlags = context.traceFlags ?? null;
    const hash = this.hash(transactionId, traceId, parentSpanId, traceFlags);
    // per event batch's context: one probe when young, the fewest otherwise (issue 46)
    const slot = this.young.find(hash, transactionId, traceId, parentSpanId, traceFlags);
    if (slot !== -1) return this.young.idAt(slot);
    const old = this.old.find(hash, transactionId, traceId, parentSpanId, traceFlags);
    let id: number;
    let fields = context;
    if (old === -1) {
      id = this.nextId++;
      this.pending.push([id, transactionId, traceId, parentSpanId, traceFlags]);
    } else {
      id = this.old.idAt(old);
      fields = this.old.fieldsAt(old);
      this.old.remove(old);
    }
    this.remember(hash, id, fields);
    return id;
  }

  /** Forgets contexts the store removed, so they are never referenced again. */
  forget(entries: ContextEntry[]): void {
    for (const [id, txn, trace, span, flags] of entries) {
      const hash = this.hash(txn, trace, span, flags);
      for (const generation of [this.young, this.old]) {
        const slot = generation.find(hash, txn, trace, span, flags);
        if (slot !== -1 && generation.idAt(slot) === id) generation.remove(slot);
      }
    }
  }

  get size(): number {
    return this.young.live + this.old.live;
  }

  takePending(): ContextEntry[] {
    const taken = this.pending;
    this.pending = [];
    return taken;
  }
}

/** One generation of remembered targets: by kind, then value (no key string built a lookup), and by id. */
class TargetGeneration {
  private readonly byKind = new Map<number, Map<string, TargetUse>>();
  readonly byId = new Map<number, TargetUse>();

  get(kind: number, value: string): TargetUse | undefined {
    return this.byKind.get(kind)?.get(value);
  }

  add(kind: number, value: string, entry: TargetUse): void {
    let values = this.byKind.get(kind);
    if (values === undefined) this.byKind.set(kind, (values = new Map()));
    values.set(value, entry);
    this.byId.set(entry.id, entry);
  }

  get size(): number {
    return this.byId.size;
  }
}

/** Targets the decoder remembers at most: beyond half of it, those unused for longest are forgotten. */
export const MAX_REMEMBERED_TARGETS = 131072;

/**
 * A remembered target (value null: one the dictionary forgot, used again by a write the kernel
 * still names by its id). It holds no numbers of its own (a double field is a separate heap object
 * under V8's pointer compression): what a batch used it for is in the dictionary's arrays, at `slot`.
 */
export class TargetUse {
  /* the batch being filled when it was last used, and its slot in that batch's stamps */
  batch = -1;
  slot = 0;
  constructor(
    readonly id: number,
    readonly kind: number,
    readonly value: string | null,
  ) {}
}

/**
 * (kind, value) pairs of write targets; a value may be a path of one kind and later of another.
 * Targets grow with every new file a host writes (a temporary file a request, a log rotated by
 * date), so memory holds only the recently used ones: a pair seen again after it was forgotten
 * gets a fresh id and row (the store allows several rows per pair; readers look targets up by
 * value). Each batch says which targets its events used, with the latest time of each tier, and
 * the writer stores them (again) with it: retention removes a target with its tiers' last events,
 * and a batch brings back one it removed. The decoder keeps only ids for the kernel's (2^19 of
 * them): a write through one this dictionary forgot is stamped by id alone.
 */
export class TargetDictionary {
  /*
   * Two generations, by value and by id: a target met again by its value moves to the young one;
   * when that holds half the capacity, the old one goes.
   */
  private young = new TargetGeneration();
  private old = new TargetGeneration();
  /* the targets the batch being filled used, by id: one forgotten since is still known by its value */
  private usedIds = new Map<number, TargetUse>();
  private nextId: number;
  private batch = 0;
  private used: TargetUse[] = [];
  /* per slot of `used`: the latest tsOffset of an event without a context, and with one (-Infinity: none) */
  private background = new Float64Array(256);
  private context = new Float64Array(256);

  constructor(
    firstFreeId = 1,
    private readonly capacity = MAX_REMEMBERED_TARGETS,
  ) {
    this.nextId = firstFreeId;
  }

  /** The target's remembered entry, or a new one with a fresh id. */
  entry(kind: number, value: string): TargetUse {
    let entry = this.young.get(kind, value);
    if (entry) return entry;
    entry = this.old.get(kind, value) ?? new TargetUse(this.nextId++, kind, value);
    if (this.young.size >= this.capacity / 2) {
      this.old = this.young;
      this.young = new TargetGeneration();
    }
    this.young.add(kind, value, entry);
    return entry;
  }

  /**
   * The target's id, for a batch filled without a decoder (tests, benches): used by an event of it
   * (`at`), or else only named, so that its row is written with the batch, stamped by no event and
   * kept by retention.
   */
  id(kind: number, value: string, at?: { tsOffset: number; context: boolean }): number {
    const entry = this.entry(kind, value);
    this.use(entry, at?.tsOffset ?? -Infinity, at?.context ?? false);
    return entry.id;
  }

  /** An event of the batch being filled, at `tsOffset` into it, used the target with this id. */
  useId(id: number, tsOffset: number, context: boolean): void {
    const entry =
      this.young.byId.get(id) ?? this.old.byId.get(id) ?? this.usedIds.get(id) ?? new TargetUse(id, 0, null);
    this.use(entry, tsOffset, context);
  }

  /** An event of the batch being filled, at `tsOffset` into it, used the target. */
  use(entry: TargetUse, tsOffset: number, context: boolean): void {
    if (entry.batch !== this.batch) this.firstUse(entry);
    const stamps = context ? this.context : this.background;
    if (tsOffset > stamps[entry.slot]!) stamps[entry.slot] = tsOffset;
  }

  private firstUse(entry: TargetUse): void {
    const slot = this.used.length;
    if (slot === this.background.length) {
      const grown = (from: Float64Array) => {
        const to = new Float64Array(2 * slot);
        to.set(from);
        return to;
      };
      this.background = grown(this.background);
      this.context = grown(this.context);
    }
    entry.batch = this.batch;
    entry.slot = slot;
    this.background[slot] = -Infinity;
    this.context[slot] = -Infinity;
    this.used.push(entry);
    this.usedIds.set(entry.id, entry);
  }

  /** A new batch is being filled: uses not taken belong to one that was dropped. */
  batchStarted(): void {
    if (this.used.length > 0) this.nextBatch();
  }

  /** The targets the batch based at `baseTs` used, each with its tiers' latest ts (null: none). */
  takeUsed(baseTs: bigint): TargetEntry[] {
    const stamp = (offset: number) => (offset === -Infinity ? null : baseTs + BigInt(offset));
    const taken = this.used.map((e, slot): TargetEntry => [
      e.id,
      e.kind,
      e.value,
      stamp(this.background[slot]!),
      stamp(this.context[slot]!),
    ]);
    this.nextBatch();
    return taken;
  }

  private nextBatch(): void {
    this.used = [];
    this.usedIds.clear();
    this.batch++;
  }

  get size(): number {
    return this.young.size + this.old.size;
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

/** The entries new since the last batch, and the targets the batch based at `baseTs` used. */
export function takeNewNames(d: Dictionaries, baseTs: bigint): NewNames {
  return {
    services: d.services.takePending(),
    comms: d.comms.takePending(),
    contexts: d.contexts.takePending(),
    targets: d.targets.takeUsed(baseTs),
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
