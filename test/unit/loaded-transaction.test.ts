/**
 * A transaction loaded whole for replay (the ClickHouse path) answers
 * replay's reads as the store it came from does, and one past the bound is
 * refused with 422 transaction-too-large before it is read.
 */
import { silentLogger } from '../../core/log/logger';
import { ProblemError } from '../../daemon/http/problem';
import { loadTransaction, MAX_LOADED_TRANSACTION_EVENTS } from '../../daemon/replay/loaded-transaction';
import { Transaction } from '../../daemon/replay/sessions/transaction';
import { nodeStoresReader, type EventReader } from '../../daemon/store/event-reader';
import { NodeStores } from '../../daemon/store/node-stores';
import { writeStore } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const BASE = 1_795_345_678_123_456_789n;
const dir = useTempDir('kreplay-loaded-');

describe('a transaction loaded for replay', () => {
  let stores: NodeStores;
  let reader: EventReader;
  let pages: number;
  beforeEach(() => {
    for (const node of ['a', 'b'])
      writeStore(
        dir.path,
        node,
        Array.from({ length: 6000 }, (_, i) => ({
          ts: BASE + BigInt(Math.floor(i / 2) * 1000),
          txn: i % 3 ? 'big' : `small-${i % 4}`,
          bytes: i,
        })),
      );
    stores = new NodeStores(dir.path, silentLogger);
    const inner = nodeStoresReader(stores);
    pages = 0;
    reader = { ...inner, page: (f, o) => (pages++, inner.page(f, o)) };
  });
  afterEach(() => stores.close());

  it('reads as the store does: every event, in order, by time range and count', async () => {
    const loaded = await loadTransaction(reader, 'big');
    const fromStore = Transaction.find(stores, 'big')!;
    const fromMemory = Transaction.find(loaded, 'big')!;
    expect(fromMemory).toMatchObject({ total: 8000, firstTs: fromStore.firstTs, lastTs: fromStore.lastTs });
    expect([...fromMemory.events()]).toEqual([...fromStore.events()]);
    const all = [...fromStore.events()];
    const start = { ts: all[4001]!.timestamp_ns, eventId: all[4001]!.event_id };
    expect([...fromMemory.events(start)]).toEqual([...fromStore.events(start)]);
    for (const ts of [BASE - 1n, BASE + 1_234_000n, BASE + 1_234_001n, BASE + 10_000_000n])
      expect(fromMemory.indexAt(ts)).toBe(fromStore.indexAt(ts));
    expect(() => [...loaded.iterate({ transactionId: 'other' }, { order: 'asc' })]).toThrow(/only/);
  });

  it(`refuses more than ${MAX_LOADED_TRANSACTION_EVENTS} events (here 7999) with 422, reading none`, async () => {
    const refused = await loadTransaction(reader, 'big', 7999).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ProblemError);
    expect(refused).toMatchObject({ kind: 'transaction-too-large', status: 422 });
    expect((refused as ProblemError).detail).toMatch(/has 8000 events.*at most 7999/);
    expect(pages).toBe(0);
    expect((await loadTransaction(reader, 'big', 8000)).summarize({ transactionId: 'big' }).count).toBe(8000);
  });
});
