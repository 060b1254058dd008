/** Writes chosen events into a node store through the agent's own StoreWriter. */
import { EventBatch } from '../../agent/ingest/event-batch';
import {
  EVENT_TYPE_CODE,
  targetKindCode,
  type EventType,
  type SyscallRecordType,
  type TargetKind,
} from '../../core/model';
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import { StoreWriter } from '../../agent/store/store-writer';

export interface TestEvent {
  ts: bigint;
  type?: EventType;
  dur?: number;
  service?: string;
  txn?: string | null;
  trace?: string | null;
  pid?: number;
  comm?: string;
  bytes?: number;
  /** syscall types only; default none (NULL) */
  target?: [kind: TargetKind, value: string];
  /** sys_read only; default none (NULL) */
  response?: number;
  /** the context's traceparent parent-id and flags; default none (a marker's context) */
  parentSpan?: string;
  traceFlags?: number;
  /** a syscall's ret; default bytes */
  ret?: number;
}

/** One batch, so one transaction: readers see all of `events` or none. */
export function writeEvents(writer: StoreWriter, events: TestEvent[]): void {
  if (events.length === 0) return;
  const base = events.reduce((min, e) => (e.ts < min ? e.ts : min), events[0]!.ts);
  const batch = new EventBatch(events.length);
  batch.clear(base);
  for (const e of events) {
    const offset = e.ts - base;
    if (offset >= 1n << 53n) throw new RangeError('events of one batch must lie within 2^53 ns');
    const common = {
      tsOffset: Number(offset),
      dur: e.dur ?? 1000,
      service: writer.services.id(e.service ?? 'svc'),
      ctx: writer.contexts.id(e.txn ?? null, e.trace ?? null, e.parentSpan ?? null, e.traceFlags ?? null),
      pid: e.pid ?? 100,
      tid: e.pid ?? 100,
      comm: writer.comms.id(e.comm ?? 'worker'),
      bytes: e.bytes ?? 64,
    };
    if (e.type === 'block_io') {
      batch.pushBlockIo({ ...common, dev: 8 * 0x100000, sector: 2048, op: 1, error: 0 });
    } else {
      const target =
        e.target &&
        writer.targets.id(targetKindCode(e.target[0]), e.target[1], {
          tsOffset: common.tsOffset,
          context: common.ctx !== 0,
        });
      batch.pushSysWrite({
        ...common,
        type: EVENT_TYPE_CODE[e.type ?? 'sys_write'] as SyscallRecordType,
        fd: 3,
        ret: e.ret ?? common.bytes,
        syscall: 1,
        target: target ?? 0,
        response: e.response ?? 0,
      });
    }
  }
  writer.writeBatch(batch);
}

const HOUR = 3_600_000_000_000;

/**
 * A writer of `<dir>/<node>.db` under the retention the tests read back against: events without a
 * transaction kept 6 h, with one 8 h, no size cap, the clock stopped at `now`.
 */
export function openRetainingWriter(dir: string, node: string, now: bigint): StoreWriter {
  return StoreWriter.open(dir, node, {
    retention: { retainNs: 6 * HOUR, retainContextNs: 8 * HOUR, maxStore: { bytes: 0 } },
    now: () => now,
  });
}

/** Opens `<dir>/<node>.db`, writes `events`, closes it. */
export function writeStore(dir: string, node: string, events: TestEvent[]): void {
  const writer = StoreWriter.open(dir, node);
  try {
    writeEvents(writer, events);
  } finally {
    writer.close();
  }
}

/** Garbage over the back half of store file `path`: its schema pages stay, its events' pages do not. */
export function damageEventPages(path: string): void {
  const size = statSync(path).size;
  const fd = openSync(path, 'r+');
  try {
    writeSync(fd, Buffer.alloc(size / 2, 0xa5), 0, size / 2, size / 2);
  } finally {
    closeSync(fd);
  }
}
