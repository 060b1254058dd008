/**
 * event_id = store id (12 hex) + timestamp_ns (16 hex) + seq (12 hex).
 * Opaque to clients; for us it is the row's primary key plus its file, and
 * fixed width so that comparing ids as strings orders them like
 * (store, ts, seq): (timestamp_ns, event_id) order is then total and stable.
 */
const ID_PATTERN = /^([0-9a-f]{12})([0-9a-f]{16})([0-9a-f]{12})$/;

export interface EventKey {
  storeId: string;
  ts: bigint;
  seq: number;
}

export function formatEventId(storeId: string, ts: bigint, seq: number): string {
  return storeId + ts.toString(16).padStart(16, '0') + seq.toString(16).padStart(12, '0');
}

export function parseEventId(id: string): EventKey | null {
  const m = ID_PATTERN.exec(id);
  if (!m) return null;
  return { storeId: m[1]!, ts: BigInt('0x' + m[2]!), seq: parseInt(m[3]!, 16) };
}
