/**
 * The events of an incident file as columns, generic over the API's fields:
 * whatever fields the events carry (new event types and fields included)
 * are written and read back without a format change. An event's key set is
 * its "shape" (one per event type in practice); each field is one column
 * holding the values of the events whose shape has it, in event order.
 *
 * Codecs, picked per column by what it holds:
 * - `const`: every value the same (the transaction id, often the node);
 * - `delta`: 64-bit integers (bigint in the API: times and durations) as
 *   differences from the previous value, JSON numbers while they are safe
 *   integers, else decimal strings;
 * - `dict`: strings once each in `dict`, the column an index per value;
 * - `event-id`: the API's event ids (store id + timestamp + seq,
 *   core/model/event-id.ts) as a store index and a seq difference per store,
 *   the timestamp taken from `timestamp_ns`;
 * - `plain`: anything else, as JSON values.
 * Nulls stay null in every codec but `const`.
 */
import { formatEventId, parseEventId } from '../model/event-id';

export type FieldValue = string | number | bigint | boolean | null;
export type EventObject = Record<string, FieldValue>;

export type Column =
  | { codec: 'const'; type: ValueType; value: FieldValue | string }
  | { codec: 'delta'; deltas: (number | string | null)[] }
  | { codec: 'dict'; dict: string[]; index: (number | null)[] }
  | { codec: 'event-id'; stores: string[]; store: number[]; seq: number[] }
  | { codec: 'plain'; type: ValueType; values: (FieldValue | string)[] };

type ValueType = 'bigint' | 'number' | 'string' | 'boolean' | 'null';

export interface EventColumns {
  count: number;
  /** each distinct key set, in order of first use */
  shapes: string[][];
  /** the shape of each event */
  shape: Column;
  columns: Record<string, Column>;
}

/** A column the writer cannot encode, or a reader finds malformed. */
export class ColumnError extends Error {}

function typeOf(value: FieldValue): ValueType {
  if (value === null) return 'null';
  const type = typeof value;
  if (type === 'bigint' || type === 'number' || type === 'string' || type === 'boolean') return type;
  throw new ColumnError(`a field of type ${type} cannot be written`);
}

const safe = (n: bigint) => n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER);

/**
 * One field's values as they are added. 64-bit integers (bigint) are kept as
 * their deltas at once: a million bigints held to the end cost the daemon
 * more in garbage collection than the rest of an export.
 */
class ValueColumn {
  /** other values as they are; a bigint as its difference from the previous bigint */
  readonly values: (FieldValue | string)[] = [];
  bigints = 0;
  others = 0;
  private last = 0n;

  push(value: FieldValue): void {
    if (typeof value === 'bigint') {
      const delta = value - this.last;
      this.last = value;
      this.values.push(safe(delta) ? Number(delta) : delta.toString());
      this.bigints++;
    } else {
      if (value !== null) this.others++;
      this.values.push(value);
    }
  }

  get length(): number {
    return this.values.length;
  }

  /** The bigints again, when every value is one. */
  bigintValues(): bigint[] | null {
    if (this.bigints !== this.values.length) return null;
    let last = 0n;
    return this.values.map((d) => (last += BigInt(d as number | string)));
  }
}

function encodeBigints(column: ValueColumn): Column {
  const deltas = column.values as (number | string | null)[];
  if (column.bigints === deltas.length && deltas.every((d, i) => i === 0 || d === 0))
    return { codec: 'const', type: 'bigint', value: String(deltas[0] ?? 0) };
  return { codec: 'delta', deltas };
}

function encodeValues(name: string, column: ValueColumn, timestamps: bigint[] | null): Column {
  if (column.bigints > 0) {
    if (column.others > 0) throw new ColumnError(`field ${name} holds bigints and other values`);
    return encodeBigints(column);
  }
  const values = column.values as FieldValue[];
  let type: ValueType = 'null';
  let same = true;
  const first = values[0] ?? null;
  for (const v of values) {
    if (v !== first) same = false;
    if (v === null) continue;
    const t = typeOf(v);
    if (type === 'null') type = t;
    else if (t !== type) throw new ColumnError(`field ${name} holds values of types ${type} and ${t}`);
  }
  if (same) return { codec: 'const', type, value: first as FieldValue };
  if (name === 'event_id' && timestamps && values.every((v) => v !== null)) {
    const column = eventIdColumn(values as string[], timestamps);
    if (column) return column;
  }
  if (type === 'string') {
    const index = new Map<string, number>();
    const dict: string[] = [];
    const column = values.map((v) => {
      if (v === null) return null;
      let i = index.get(v as string);
      if (i === undefined) {
        i = dict.push(v as string) - 1;
        index.set(v as string, i);
      }
      return i;
    });
    return { codec: 'dict', dict, index: column };
  }
  return { codec: 'plain', type, values: values as (number | boolean | null)[] };
}

/** null when some id is not a store event id of its event's timestamp. */
function eventIdColumn(ids: string[], timestamps: bigint[]): Column | null {
  const stores: string[] = [];
  const storeIndex = new Map<string, number>();
  const lastSeq: number[] = [];
  const store: number[] = [];
  const seq: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    const key = parseEventId(ids[i]!);
    if (!key || key.ts !== timestamps[i]) return null;
    let s = storeIndex.get(key.storeId);
    if (s === undefined) {
      s = stores.push(key.storeId) - 1;
      storeIndex.set(key.storeId, s);
      lastSeq.push(0);
    }
    store.push(s);
    seq.push(key.seq - lastSeq[s]!);
    lastSeq[s] = key.seq;
  }
  return { codec: 'event-id', stores, store, seq };
}

/** Events added one at a time (a page at a time from a store), columns at the end: no event object is kept. */
export class ColumnsBuilder {
  private readonly shapes: string[][] = [];
  /** each shape's columns, in its key order */
  private readonly shapeColumns: ValueColumn[][] = [];
  private readonly shapeIndex = new Map<string, number>();
  /** the last shape of each event type: events of a type nearly always share one */
  private readonly lastShape = new Map<unknown, number>();
  private readonly shapeOf: number[] = [];
  private readonly values = new Map<string, ValueColumn>();

  get count(): number {
    return this.shapeOf.length;
  }

  private shape(event: EventObject): number {
    const keys = Object.keys(event);
    const last = this.lastShape.get(event.event_type);
    if (last !== undefined) {
      const known = this.shapes[last]!;
      if (known.length === keys.length && known.every((key, i) => key === keys[i])) return last;
    }
    const signature = keys.join('\0');
    let s = this.shapeIndex.get(signature);
    if (s === undefined) {
      s = this.shapes.push(keys) - 1;
      this.shapeIndex.set(signature, s);
      this.shapeColumns.push(
        keys.map((key) => {
          let column = this.values.get(key);
          if (!column) this.values.set(key, (column = new ValueColumn()));
          return column;
        }),
      );
    }
    this.lastShape.set(event.event_type, s);
    return s;
  }

  add(event: EventObject): void {
    const s = this.shape(event);
    this.shapeOf.push(s);
    const keys = this.shapes[s]!;
    const columns = this.shapeColumns[s]!;
    for (let i = 0; i < keys.length; i++) columns[i]!.push(event[keys[i]!] ?? null);
  }

  finish(): EventColumns {
    const count = this.shapeOf.length;
    // event ids are keyed on timestamps only when every event has both
    const ts = this.values.get('timestamp_ns');
    const timestamps =
      ts?.length === count && this.values.get('event_id')?.length === count ? ts.bigintValues() : null;
    const columns: Record<string, Column> = {};
    for (const [name, column] of this.values) columns[name] = encodeValues(name, column, timestamps);
    const shape = new ValueColumn();
    for (const s of this.shapeOf) shape.push(s);
    return { count, shapes: this.shapes, shape: encodeValues('', shape, null), columns };
  }
}

export function encodeEvents(events: readonly EventObject[]): EventColumns {
  const builder = new ColumnsBuilder();
  for (const event of events) builder.add(event);
  return builder.finish();
}

function fail(message: string): never {
  throw new ColumnError(message);
}

function typed(type: string, value: unknown, name: string): FieldValue {
  if (value === null) return null;
  if (type === 'bigint') {
    if (typeof value !== 'string' && typeof value !== 'number') fail(`column ${name}: bad bigint value`);
    return BigInt(value);
  }
  if (typeof value !== type) fail(`column ${name}: ${typeof value} where ${type} was declared`);
  return value as FieldValue;
}

/** The `count` values of a column; `timestamps` serves the event-id codec. */
function decodeValues(name: string, c: Column, count: number, timestamps: () => bigint[]): FieldValue[] {
  if (typeof c !== 'object' || c === null) fail(`column ${name} is not an object`);
  const sized = <T>(list: T[] | undefined, what: string): T[] => {
    if (!Array.isArray(list) || list.length !== count)
      fail(
        `column ${name}: ${what} holds ${Array.isArray(list) ? list.length : 'no'} values for ${count} events`,
      );
    return list;
  };
  switch (c.codec) {
    case 'const':
      return new Array<FieldValue>(count).fill(typed(c.type, c.value, name));
    case 'delta': {
      let last = 0n;
      return sized(c.deltas, 'deltas').map((d) => {
        if (d === null) return null;
        if (typeof d !== 'number' && typeof d !== 'string') fail(`column ${name}: bad delta`);
        last += BigInt(d);
        return last;
      });
    }
    case 'dict':
      return sized(c.index, 'index').map((i) => {
        if (i === null) return null;
        const value = c.dict[i];
        if (typeof value !== 'string') fail(`column ${name}: index ${i} outside its dictionary`);
        return value;
      });
    case 'event-id': {
      const ts = timestamps();
      const stores = sized(c.store, 'store');
      const seqs = sized(c.seq, 'seq');
      const lastSeq = c.stores.map(() => 0);
      return stores.map((s, i) => {
        const storeId = c.stores[s];
        if (typeof storeId !== 'string' || ts[i] === undefined) fail(`column ${name}: bad store index ${s}`);
        lastSeq[s]! += seqs[i]!;
        return formatEventId(storeId, ts[i]!, lastSeq[s]!);
      });
    }
    case 'plain':
      return sized(c.values, 'values').map((v) => typed(c.type, v, name));
    default:
      return fail(`column ${name} has an unknown codec ${JSON.stringify((c as { codec: unknown }).codec)}`);
  }
}

/**
 * The events the columns hold. With `fields`, only those keys are decoded and
 * set on the events (a replay against a build reads a dozen of an event's
 * fields, and building the rest was half of its start); every other column
 * is still checked to hold one value per event that has its key.
 */
export function decodeEvents(data: EventColumns, fields?: ReadonlySet<string>): EventObject[] {
  const { count, shapes, columns } = data;
  if (!Number.isSafeInteger(count) || count < 0) fail('the event count is not a count');
  if (!Array.isArray(shapes) || typeof columns !== 'object' || columns === null)
    fail('shapes or columns missing');
  const shapeOf = decodeValues('shape', data.shape, count, () => []) as number[];
  // events per shape, then values per key: a few shapes, many events
  const perShape = new Map<number, number>();
  for (const s of shapeOf) perShape.set(s, (perShape.get(s) ?? 0) + 1);
  const sizes = new Map<string, number>();
  for (const [s, n] of perShape) {
    const keys = shapes[s];
    if (!Array.isArray(keys)) fail(`shape ${s} is not listed`);
    for (const key of keys) sizes.set(key, (sizes.get(key) ?? 0) + n);
  }
  const decoded = new Map<string, FieldValue[]>();
  const column = (name: string): FieldValue[] => {
    let values = decoded.get(name);
    if (!values) {
      const c = columns[name];
      if (!c) fail(`column ${name} is missing`);
      values = decodeValues(name, c, sizes.get(name) ?? 0, () => column('timestamp_ns') as bigint[]);
      decoded.set(name, values);
    }
    return values;
  };
  const wanted = (name: string) => fields === undefined || fields.has(name);
  for (const [name, size] of sizes) if (!wanted(name)) checkSize(name, columns[name], size);
  // keys by number and a typed cursor per key: a Map lookup per field made this loop most of a read
  const names = [...sizes.keys()].filter(wanted);
  const values = names.map(column);
  const keyOf = new Map(names.map((name, k) => [name, k]));
  const shapeKeys = shapes.map((keys) =>
    Array.isArray(keys) ? keys.flatMap((key) => keyOf.get(key) ?? []) : [],
  );
  const cursor = new Int32Array(names.length);
  return shapeOf.map((s) => {
    const event: EventObject = {};
    for (const k of shapeKeys[s]!) event[names[k]!] = values[k]![cursor[k]!++]!;
    return event;
  });
}

/** Where each codec keeps one entry per event (a const column keeps none). */
const PER_EVENT: Record<Column['codec'], string | null> = {
  const: null,
  delta: 'deltas',
  dict: 'index',
  'event-id': 'store',
  plain: 'values',
};

/** A column left undecoded still holds one value per event that has its key. */
function checkSize(name: string, c: Column | undefined, count: number): void {
  if (typeof c !== 'object' || c === null) fail(`column ${name} is missing`);
  if (!Object.hasOwn(PER_EVENT, c.codec))
    fail(`column ${name} has an unknown codec ${JSON.stringify(c.codec)}`);
  const key = PER_EVENT[c.codec];
  const list: unknown = key === null ? null : (c as unknown as Record<string, unknown>)[key];
  if (key !== null && (!Array.isArray(list) || list.length !== count))
    fail(`column ${name}: holds ${Array.isArray(list) ? list.length : 'no'} values for ${count} events`);
}
