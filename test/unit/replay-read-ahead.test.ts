/**
 * Reading a transaction ahead through a pager (the query workers): events
 * come in chunks as replay-event columns, in order, identical to what the
 * synchronous read gives; a start inside a timestamp skips what was emitted
 * before it; a failed read is tried again; a closed cursor reads no more.
 */
import { silentLogger } from '../../core/log/logger';
import { eventToJson } from '../../core/model';
import { toReplayChunk, toReplayEvent } from '../../daemon/replay/replay-event';
import { Transaction, type EventCursor } from '../../daemon/replay/sessions/transaction';
import type { EventFilter, PageOptions } from '../../daemon/store/event-filter';
import { NodeStores } from '../../daemon/store/node-stores';
import { writeStore } from '../support/event-store';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const T0 = 1_795_345_678_000_000_000n;
const EVENTS = 5000;

/** Drains `cursor`, waiting for its chunks. */
async function drain(cursor: EventCursor): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const event = cursor.next();
    if (event === null) return out;
    if (event === undefined) await cursor.ready();
    else out.push(event.json);
  }
}

describe('replay reading ahead through the query workers', () => {
  let stores: NodeStores;
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
  });
  afterAll(() => {
    stores.close();
    rmSync(dir.path, { recursive: true, force: true });
  });

  it('gives the events the synchronous read gives, chunk by chunk, from any start', async () => {
    const calls: PageOptions[] = [];
    const pager = async (filter: EventFilter, opts: PageOptions) => {
      calls.push(opts);
      return toReplayChunk(stores.page(filter, opts));
    };
    const found = Transaction.find(stores, 'tx', { pager, log: silentLogger })!;
    const sync = Transaction.find(stores, 'tx')!;
    const expected = [...sync.events()].map((event) => eventToJson(event));
    expect(await drain(found.cursor(undefined, () => {}))).toEqual(expected);
    expect(calls.length).toBeGreaterThan(1);
    expect(calls.every((opts) => opts.order === 'asc')).toBe(true);

    // start at the second event of a timestamp: the first of it was emitted already
    const third = [...sync.events()][2]!;
    const second = [...sync.events()][3]!;
    expect(second.timestamp_ns).toBe(third.timestamp_ns);
    const start = { ts: second.timestamp_ns, eventId: second.event_id };
    expect(await drain(found.cursor(start, () => {}))).toEqual(
      [...sync.events(start)].map((event) => toReplayEvent(event).json),
    );
    expect((await drain(found.cursor(start, () => {})))[0]).toBe(eventToJson(second));
  });

  it('tries a failed read again, and reads no more once closed', async () => {
    let failures = 2;
    let calls = 0;
    const pager = async (filter: EventFilter, opts: PageOptions) => {
      calls++;
      if (failures-- > 0) throw new Error('the query workers are busy');
      return toReplayChunk(stores.page(filter, opts));
    };
    const found = Transaction.find(stores, 'tx', { pager, log: silentLogger })!;
    const events = await drain(found.cursor(undefined, () => {}));
    expect(events).toHaveLength(EVENTS);
    expect(calls).toBeGreaterThan(2);

    const before = calls;
    const closed = found.cursor(undefined, () => {});
    closed.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(calls - before).toBeLessThanOrEqual(1);
    expect(closed.next()).toBeUndefined();
  });
});
