/** What the replay benches share: one transaction written evenly over a span, and a quantile. */
import { EventBatch } from '../agent/ingest/event-batch';
import type { StoreWriter } from '../agent/store/store-writer';

const CHUNK = 50_000;

/** `events` writes of 64 B under one context, spread evenly over `spanNs` from a fixed start. */
export function writeEvenTransaction(
  writer: StoreWriter,
  context: string,
  events: number,
  spanNs: number,
): void {
  const comm = writer.comms.id('worker');
  const service = writer.services.id('svc');
  const ctx = writer.contexts.id(context, null);
  for (let from = 0; from < events; from += CHUNK) {
    const batch = new EventBatch(CHUNK);
    batch.clear(1_795_000_000_000_000_000n);
    for (let i = from; i < Math.min(events, from + CHUNK); i++)
      batch.pushSysWrite({
        tsOffset: Math.floor((i * spanNs) / events),
        dur: 1000,
        service,
        ctx,
        pid: 1,
        tid: 1,
        comm,
        bytes: 64,
        fd: 3,
        ret: 64,
        syscall: 1,
      });
    writer.writeBatch(batch);
  }
}

/** The q-quantile of `values` (NaN for none), nearest rank below. */
export const quantile = (values: number[], q: number): number =>
  values.length === 0 ? NaN : [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * q)]!;
