/** Made-up events of one transaction for incident-file tests: writes to files and sockets, and block requests. */
import type { ApiEvent } from '../../core/model';
import { formatEventId } from '../../core/model/event-id';

const STORES = ['a1b2c3d4e5f6', '0f0e0d0c0b0a'];
const TARGETS: [string, 'file' | 'socket' | 'pipe' | 'char'][] = [
  ['/var/lib/app/data.sqlite', 'file'],
  ['/var/lib/app/data.sqlite-wal', 'file'],
  ['tcp 10.0.0.5:5432', 'socket'],
  ['unix /run/app/api.sock', 'socket'],
  ['/dev/null', 'char'],
  ['pipe', 'pipe'],
];

/** `n` events from two stores, in (timestamp_ns, event_id) order, as the API gives them. */
export function incidentEvents(n: number, transactionId = 'txn-1'): ApiEvent[] {
  const events: ApiEvent[] = [];
  const seq = [0, 0];
  let ts = 1_763_900_000_123_456_789n;
  for (let i = 0; i < n; i++) {
    ts += BigInt(1000 + ((i * 7919) % 50_000));
    const store = i % 5 === 4 ? 1 : 0;
    seq[store]! += 1 + (i % 3);
    const block = i % 11 === 10;
    // fields in the order the API writes them (core/model/event.ts)
    const common = {
      event_id: formatEventId(STORES[store]!, ts, seq[store]!),
      event_type: block ? ('block_io' as const) : ('sys_write' as const),
      timestamp_ns: ts,
      duration_ns: BigInt(2000 + ((i * 104729) % 3_000_000)),
      service_name: store === 0 ? 'checkout' : 'payments',
      transaction_id: transactionId,
      trace_id: i % 2 ? '4bf92f3577b34da6a3ce929d0e0e4736' : null,
      node: store === 0 ? 'node-a' : 'node-b',
      pid: 4242 + store,
      tid: 4242 + store + (i % 4),
      comm: store === 0 ? 'checkout-api' : 'payd',
      bytes: 512 * (1 + (i % 8)),
    };
    if (i % 11 === 10) {
      events.push({
        ...common,
        event_type: 'block_io',
        device: '7:0',
        sector: 2048 + i * 8,
        op: 'write',
        error: 0,
      });
      continue;
    }
    const [target, kind] = TARGETS[i % TARGETS.length]!;
    events.push({
      ...common,
      event_type: 'sys_write',
      syscall: i % 3 ? 'write' : 'pwrite64',
      fd: 3 + (i % TARGETS.length),
      ret: i % 13 === 0 ? -28 : common.bytes,
      target_kind: kind,
      target,
    });
  }
  return events;
}
