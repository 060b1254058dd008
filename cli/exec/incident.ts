/** The incident's events from the daemon: every page of GET /api/events for the transaction, in replay order. */
import { requestJson } from '../daemon-request';
import type { RecordedCall } from './exec-plan';

const PAGE = 10_000;

interface WireEvent {
  event_type: string;
  timestamp_ns: string;
  duration_ns: string;
  target?: string | null;
  target_kind?: string | null;
  syscall?: string | null;
  ret?: number | null;
  bytes?: number | null;
  pid?: number | null;
  fd?: number | null;
  response_ns?: string | number | null;
}

export async function fetchIncident(server: string, transactionId: string): Promise<RecordedCall[]> {
  const calls: RecordedCall[] = [];
  let cursor: string | null = null;
  do {
    const query = new URLSearchParams({
      transaction_id: transactionId,
      limit: String(PAGE),
      int64: 'string',
    });
    if (cursor) query.set('cursor', cursor);
    const page: { events: WireEvent[]; next_cursor: string | null } = await requestJson(
      'GET',
      `${server}/api/events?${query}`,
    );
    for (const e of page.events) {
      calls.push({
        event_type: e.event_type,
        timestamp_ns: BigInt(e.timestamp_ns),
        duration_ns: BigInt(e.duration_ns),
        target: e.target ?? null,
        target_kind: e.target_kind ?? null,
        syscall: e.syscall ?? null,
        ret: e.ret ?? null,
        bytes: e.bytes ?? null,
        pid: e.pid ?? null,
        fd: e.fd ?? null,
        response_ns: e.response_ns === null || e.response_ns === undefined ? null : BigInt(e.response_ns),
      });
    }
    cursor = page.next_cursor;
  } while (cursor);
  return calls;
}
