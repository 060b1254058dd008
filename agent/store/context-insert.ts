/**
 * A batch's new contexts go in with one `INSERT ... SELECT` from kreplay_contexts
 * (native/sqlite/kreplay_contexts.c) over the entries packed in four blobs: a statement run per
 * context cost as much as the row's three B-trees (issue 46), and a followed server brings one new
 * context a request. The extension computes each id's lookup key (core/store/context-key.ts) as it
 * goes, under the store's seed (bound with each batch: nothing added a row).
 */
import type Database from 'better-sqlite3';
import { readContextKeySeed } from '../../core/store/context-key-seed';
import type { ContextEntry } from '../ingest/dictionary';

/** What kreplay_contexts reads: its four arguments. */
export interface PackedContexts {
  ids: Buffer;
  flags: Buffer;
  lengths: Buffer;
  text: Buffer;
}

const NULL_LENGTH = -1;

/** The entries as kreplay_contexts reads them: strings as UTF-8 (as a bound string is), null as a length or flags of -1. */
export function packContexts(entries: readonly ContextEntry[]): PackedContexts {
  const n = entries.length;
  const ids = new Float64Array(n);
  const flags = new Int32Array(n);
  const lengths = new Int32Array(3 * n);
  const strings: string[] = [];
  // each field by hand: an array and its iterator a field cost the writer ~40 ns (issue 46)
  const field = (value: string | null, at: number): void => {
    lengths[at] = value === null ? NULL_LENGTH : value.length;
    if (value !== null) strings.push(value);
  };
  for (let i = 0; i < n; i++) {
    const [id, txn, trace, span, traceFlags] = entries[i]!;
    if (!Number.isSafeInteger(id) || id < 1)
      throw new RangeError(`context id ${id} is not a positive integer`);
    if (traceFlags !== null && !(Number.isInteger(traceFlags) && traceFlags >= 0 && traceFlags <= 0xff))
      throw new RangeError(`context ${id}: trace flags ${traceFlags} are not a byte`);
    ids[i] = id;
    flags[i] = traceFlags ?? NULL_LENGTH;
    field(txn, 3 * i);
    field(trace, 3 * i + 1);
    field(span, 3 * i + 2);
  }
  const joined = strings.join('');
  const text = Buffer.from(joined, 'utf8');
  // every character but ASCII takes more than one UTF-8 byte: then each length is counted in bytes
  // (told by the encoding's length, not a second scan of the text: a batch holds ~90 characters a request)
  if (text.length !== joined.length) {
    for (let i = 0, s = 0; i < lengths.length; i++)
      if (lengths[i] !== NULL_LENGTH) lengths[i] = Buffer.byteLength(strings[s++]!, 'utf8');
  }
  return {
    ids: Buffer.from(ids.buffer),
    flags: Buffer.from(flags.buffer),
    lengths: Buffer.from(lengths.buffer),
    text,
  };
}

export class ContextInsert {
  private readonly insert: Database.Statement<[Buffer, Buffer, Buffer, Buffer, number]>;
  /** a store's seed never changes once made */
  private readonly seed: number;

  /** `db` has the agent's extension loaded (EventInsert.prepareConnection). */
  constructor(db: Database.Database) {
    this.insert = db.prepare(
      `INSERT INTO contexts (id, transaction_id, trace_id, parent_span_id, trace_flags, transaction_key, trace_key)
       SELECT id, transaction_id, trace_id, parent_span_id, trace_flags, transaction_key, trace_key
       FROM kreplay_contexts(?, ?, ?, ?, ?)`,
    );
    this.seed = readContextKeySeed(db);
  }

  run(entries: readonly ContextEntry[]): void {
    if (entries.length === 0) return;
    const packed = packContexts(entries);
    this.insert.run(packed.ids, packed.flags, packed.lengths, packed.text, this.seed);
  }
}
