/**
 * next_cursor: opaque to clients, base64url of
 *   version (1) | order (1) | event_id (20: store id, ts, seq) | filter hash (8) | check (4).
 * The event id carries the position's timestamp; the filter hash turns a
 * cursor reused with other filters into a 400 instead of a silently wrong
 * page; the check catches truncated or edited cursors.
 */
import { createHash } from 'node:crypto';
import { parseEventId } from '../../core/model';
import { InvalidValue } from '../http/query-values';
import type { EventFilter, EventOrder, EventPosition } from '../store/event-filter';

export interface CursorState {
  order: EventOrder;
  after: EventPosition;
  /** 16 hex digits */
  filterHash: string;
}

const VERSION = 1;
const ID_BYTES = 20;
const HASH_BYTES = 8;
const CHECK_BYTES = 4;
const BODY_BYTES = 2 + ID_BYTES + HASH_BYTES;
const CURSOR_TEXT = /^[A-Za-z0-9_-]+$/;

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest();

export function filterHash(filter: EventFilter): string {
  const fields: unknown[] = [
    filter.transactionId ?? null,
    filter.traceId ?? null,
    filter.service ?? null,
    filter.node ?? null,
    filter.types ? [...new Set(filter.types)].sort() : null,
    filter.fromNs?.toString() ?? null,
    filter.toNs?.toString() ?? null,
    filter.minDurationNs?.toString() ?? null,
  ];
  // appended only when given, so cursors made before target filters existed stay valid
  if (filter.target || filter.targetKinds) {
    fields.push(filter.target ? [filter.target.value, filter.target.prefix] : null);
    fields.push(filter.targetKinds ? [...new Set(filter.targetKinds)].sort() : null);
  }
  return sha256(JSON.stringify(fields)).subarray(0, HASH_BYTES).toString('hex');
}

export function encodeCursor(state: CursorState): string {
  const body = Buffer.concat([
    Buffer.from([VERSION, state.order === 'asc' ? 0 : 1]),
    Buffer.from(state.after.eventId, 'hex'),
    Buffer.from(state.filterHash, 'hex'),
  ]);
  return Buffer.concat([body, sha256(body).subarray(0, CHECK_BYTES)]).toString('base64url');
}

export function decodeCursor(text: string): CursorState {
  const bytes = CURSOR_TEXT.test(text) ? Buffer.from(text, 'base64url') : Buffer.alloc(0);
  const body = bytes.subarray(0, BODY_BYTES);
  const valid =
    bytes.length === BODY_BYTES + CHECK_BYTES &&
    bytes.toString('base64url') === text && // one spelling per cursor: unused trailing bits must be zero
    bytes[0] === VERSION &&
    (bytes[1] === 0 || bytes[1] === 1) &&
    sha256(body).subarray(0, CHECK_BYTES).equals(bytes.subarray(BODY_BYTES));
  const eventId = body.subarray(2, 2 + ID_BYTES).toString('hex');
  const key = valid ? parseEventId(eventId) : null;
  if (!key) throw new InvalidValue('malformed: pass next_cursor from a previous response unchanged');
  return {
    order: bytes[1] === 0 ? 'asc' : 'desc',
    after: { ts: key.ts, eventId },
    filterHash: body.subarray(2 + ID_BYTES).toString('hex'),
  };
}
