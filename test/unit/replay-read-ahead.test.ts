/**
 * Reading a transaction through the query workers' TransactionReader (here
 * the same reader over the node files, in-process): events come in pages as
 * replay-event columns, in order, identical to the store's own order; a start
 * inside a timestamp skips what was emitted before it; the index of a time
 * counts what lies before it; a failed read is tried again while a waiter is
 * told of it and the next read goes on from the same place.
 */
import { silentLogger } from '../../core/log/logger';
import { eventToJson, type ApiEvent } from '../../core/model';
import { laneBuffer } from '../../daemon/replay/lane/lane-layout';
import { FrameBuffer } from '../../daemon/replay/lane/frame-buffer';
import { PREFETCH_CHUNK, Transaction, type FrameReader } from '../../daemon/replay/sessions/transaction';
import { storeTransactionReader, type TransactionReader } from '../../daemon/replay/transaction-reader';
import { nodeStoresReader } from '../../daemon/store/event-reader';
import { NodeStores } from '../../daemon/store/node-stores';
import { writeStore } from '../support/event-store';
import { FakeTransactionReader, fakeEvent } from '../support/fake-transaction-reader';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const T0 = 1_795_345_678_000_000_000n;
const EVENTS = 5000;

/** The event ids `reader` writes as frames, page by page, into a buffer smaller than the transaction's frames. */
async function drain(reader: FrameReader): Promise<string[]> {
  const buffer = new FrameBuffer(laneBuffer(8 << 20));
  const out: string[] = [];
  while (!reader.done) {
    const spec = { firstTs: T0, speedFactor: 1, extraLatencyNs: 0n, firstIndex: out.length };
    await reader.fill(buffer, spec);
    for (; buffer.taken < buffer.tail; buffer.take(1)) out.push(buffer.eventId(buffer.taken));
  }
  return out;
}

describe('replay reading a transaction a page at a time', () => {
  let stores: NodeStores;
  let all: ApiEvent[];
  const dir = { path: '' };
  beforeAll(() => {
    dir.path = mkdtempSync(join(tmpdir(), 'kreplay-read-ahead-'));
    // two events share each timestamp, so a start may fall between them
    writeStore(
      dir.path,
      'n1',
      Array.from({ length: EVENTS }, (_, i) => ({
        ts: T0 + BigInt(Math.floor(i / 2)) * 1000n,
        txn: 'tx',
        bytes: i,
      })),
    );
    stores = new NodeStores(dir.path, silentLogger);
    all = stores.page({ transactionId: 'tx' }, { order: 'asc', limit: EVENTS }).events;
  });
  afterAll(() => {
    stores.close();
    rmSync(dir.path, { recursive: true, force: true });
  });

  /** The node stores' reader, counting the pages asked for, and their time ranges. */
  function counted(): { reader: TransactionReader; limits: number[]; spans: bigint[] } {
    const inner = storeTransactionReader(nodeStoresReader(stores));
    const limits: number[] = [];
    const spans: bigint[] = [];
    return {
      limits,
      spans,
      // no frames of its own: the pages it counts are written into the buffer here
      reader: {
        summarize: inner.summarize,
        indexAt: inner.indexAt,
        page: (range, limit, after) => {
          limits.push(limit);
          spans.push(range.toNs - range.fromNs);
          return inner.page(range, limit, after);
        },
      },
    };
  }

  it('gives the events in the store order, page by page, from any start; counts an index', async () => {
    const { reader, limits, spans } = counted();
    const found = (await Transaction.find(reader, 'tx', silentLogger))!;
    expect(found).toMatchObject({ total: EVENTS, firstTs: T0, lastTs: all.at(-1)!.timestamp_ns });
    expect(await Transaction.find(reader, 'nope', silentLogger)).toBeNull();
    const expected = all.map((event) => eventToJson(event));
    const ids = all.map((event) => event.event_id);
    expect(await drain(found.frames(undefined))).toEqual(ids);
    expect(limits.length).toBeGreaterThan(1);
    // each read asks for a window of time (two pages' worth at the mean rate), not for the whole transaction
    const window = (Number(found.durationNs) + 1) * ((2 * PREFETCH_CHUNK) / EVENTS);
    expect(Math.max(...spans.map(Number))).toBeLessThanOrEqual(Math.ceil(window) + 1);
    expect(Math.max(...spans.map(Number))).toBeLessThan(Number(found.durationNs));

    // start at the second event of a timestamp: the first of it was emitted already
    const second = all[3]!;
    expect(second.timestamp_ns).toBe(all[2]!.timestamp_ns);
    const start = { ts: second.timestamp_ns, eventId: second.event_id };
    expect(await drain(found.frames(start))).toEqual(ids.slice(3));

    // the history's read: pages no larger than what is still wanted, each event's frame as the live stream's
    limits.length = 0;
    const got: string[] = [];
    const unknown = (a: number, b: number) => new Float64Array(b - a).fill(NaN);
    for await (const page of found.history(start, 3, 3, () => 13, unknown, {
      speedFactor: 1,
      extraLatencyNs: 0n,
    }))
      for (const data of Buffer.from(page.bytes)
        .toString('utf8')
        .matchAll(/^data: (.*)$/gm))
        got.push(data[1]!.replace(/,"replay_offset_ns":.*$/, '}'));
    expect(got).toEqual(expected.slice(3, 13));
    // the event before the start at its timestamp took a place in the first page: one more is read
    expect(limits).toEqual([10, 1]);

    for (const [ts, index] of [
      [T0 - 1n, 0],
      [T0, 0],
      [T0 + 1n, 2],
      [T0 + 1_234_000n, 2468],
      [T0 + 1_234_001n, 2470],
      [T0 + 10_000_000n, EVENTS],
    ] as const)
      expect(await found.indexAt(ts)).toBe(index);
  });

  it('tells the reader of a failed read, and reads the same page again next time', async () => {
    const { reader } = counted();
    let failures = 2;
    let calls = 0;
    const failing: TransactionReader = {
      ...reader,
      page: (range, limit, after) => {
        calls++;
        return failures-- > 0
          ? Promise.reject(new Error('the query workers are busy'))
          : reader.page(range, limit, after);
      },
    };
    const found = (await Transaction.find(failing, 'tx', silentLogger))!;
    const frames = found.frames(undefined);
    const buffer = new FrameBuffer(laneBuffer(256 << 10));
    const spec = { firstTs: T0, speedFactor: 1, extraLatencyNs: 0n, firstIndex: 0 };
    const told: string[] = [];
    for (;;) {
      try {
        await frames.fill(buffer, spec);
        break;
      } catch (err) {
        told.push((err as Error).message);
      }
    }
    expect(told).toEqual(['the query workers are busy', 'the query workers are busy']);
    // nothing was lost to the failures: the read that landed starts at the first event
    expect(buffer.eventId(0)).toBe(all[0]!.event_id);
    expect(calls).toBe(3);
  });

  it('reads across gaps and bursts in windows of time, every event once, in order', async () => {
    // two dense bursts 10 s apart, and a lone event between them
    const events = [
      ...Array.from({ length: 3000 }, (_, i) => fakeEvent('gappy', T0 + BigInt(i), i)),
      fakeEvent('gappy', T0 + 4_000_000_000n, 3000),
      ...Array.from({ length: 3000 }, (_, i) =>
        fakeEvent('gappy', T0 + 10_000_000_000n + BigInt(i), 3001 + i),
      ),
    ];
    const fake = new FakeTransactionReader(events);
    const found = (await Transaction.find(fake, 'gappy', silentLogger))!;
    expect(await drain(found.frames(undefined))).toEqual(events.map((e) => e.event_id));
    expect(fake.read).toBe(events.length);
    // the gap is crossed by doubling windows: a few dozen reads, not one per window's width
    expect(fake.pages.length).toBeLessThan(40);
  });
});
