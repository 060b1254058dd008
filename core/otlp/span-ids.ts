/**
 * Span ids of exported events, made from the event id (store id + seq) so
 * the same event always gets the same span: the agent's live export, the
 * daemon's export of the stored event and an incident file's export name one
 * span, which a backend keeps once. Within a store the mapping from seq is
 * one to one (two odd multiplications, each invertible mod 2^32); the store
 * id, mixed in, keeps two nodes' spans of one trace apart.
 */
import { createHash } from 'node:crypto';
import { parseEventId } from '../model/event-id';

const hex8 = (n: number) => (n >>> 0).toString(16).padStart(8, '0');

/** A 64-bit span id (16 hex digits, never all zero) for the event of `seq` in the store `storeId`. */
export function spanIdFor(storeId: string, seq: number): string {
  const storeHi = parseInt(storeId.slice(0, 8), 16);
  const storeLo = parseInt(storeId.slice(8), 16);
  const seqLo = seq % 0x1_0000_0000;
  const seqHi = Math.floor(seq / 0x1_0000_0000);
  const lo = Math.imul(seqLo, 0x9e3779b1) >>> 0;
  const hi = (seqHi + Math.imul(lo, 0x85ebca6b)) >>> 0;
  const id = hex8(hi ^ storeHi) + hex8(lo ^ Math.imul(storeLo, 0xc2b2ae35));
  // all zero is an invalid span id (W3C): one seq of 2^64 per store lands there
  return id === '0000000000000000' ? '0000000000000001' : id;
}

/** spanIdFor the event `eventId` names, or null if it is not an event id. */
export function spanIdOf(eventId: string): string | null {
  const key = parseEventId(eventId);
  return key && spanIdFor(key.storeId, key.seq);
}

/** The span id of a summary span (rare: one per capped trace and window), from what names it. */
export function summarySpanIdOf(...parts: string[]): string {
  const id = createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 16);
  return id === '0000000000000000' ? '0000000000000001' : id;
}
