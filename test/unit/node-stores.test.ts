import fc from 'fast-check';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger, type Logger } from '../../core/log/logger';
import Database from 'better-sqlite3';
import { schemaVersionOf, SLOW_EVENT_NS } from '../../core/store/schema';
import { type ApiEvent } from '../../core/model';
import { StoreWriter } from '../../agent/store/store-writer';
import type { EventFilter, EventOrder, EventPosition } from '../../daemon/store/event-filter';
import { NodeStore } from '../../daemon/store/node-store';
import { NodeStores } from '../../daemon/store/node-stores';
import { byPosition, matchesFilter } from '../support/event-match';
import { damageEventPages, writeEvents, writeStore, type TestEvent } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';
import { HOUR_MS, useWallStep } from '../support/wall-step';

const dir = useTempDir();
const BASE = 1795345678123456789n;

function pageAll(stores: NodeStores, filter: EventFilter, order: EventOrder, limit: number): ApiEvent[] {
  const out: ApiEvent[] = [];
  let after: EventPosition | undefined;
  for (let pages = 0; pages < 10_000; pages++) {
    const page = stores.page(filter, { limit, order, after });
    expect(page.events.length).toBeLessThanOrEqual(limit);
    out.push(...page.events);
    if (!page.next) return out;
    expect(page.events.length).toBe(limit);
    after = page.next;
  }
  throw new Error('paging did not end');
}

/* Many events share timestamps within and across nodes; some traces span transactions and nodes. */
function dataset(node: number): TestEvent[] {
  const events: TestEvent[] = [];
  for (let i = 0; i < 150; i++) {
    const txn = i % 3 === 0 ? null : `t${i % 7}`;
    events.push({
      ts: BASE + BigInt(Math.floor(i / 4) * 10),
      type: i % 5 === 0 ? 'block_io' : 'sys_write',
      dur: [500, SLOW_EVENT_NS - 1, SLOW_EVENT_NS, 2_500_000][(i + node) % 4],
      service: `svc${(i + node) % 3}`,
      txn,
      trace: txn && `tr${i % 2}`,
    });
  }
  return events;
}

describe('NodeStores', () => {
  let stores: NodeStores;
  let all: ApiEvent[];

  beforeEach(() => {
    for (const node of [0, 1, 2]) writeStore(dir.path, `node${node}`, dataset(node));
    stores = new NodeStores(dir.path, silentLogger);
    all = pageAll(stores, {}, 'asc', 10_000);
  });
  afterEach(() => stores.close());

  it('merges every node in (timestamp_ns, event_id) order, ties on ts across nodes included', () => {
    expect(all).toHaveLength(450);
    expect([...all].sort(byPosition)).toEqual(all);
    expect(new Set(all.map((e) => e.event_id)).size).toBe(450);
    expect(stores.nodes()).toEqual(['node0', 'node1', 'node2']);
    const tied = all.filter((e) => e.timestamp_ns === BASE);
    expect(new Set(tied.map((e) => e.node)).size).toBe(3);
  });

  it('pages any filter in either order exactly like filtering the whole sequence', () => {
    const filter = fc.record(
      {
        transactionId: fc.constantFrom('t1', 't2', 't5', 'nope'),
        traceId: fc.constantFrom('tr0', 'tr1', 'nope'),
        service: fc.constantFrom('svc0', 'svc2', 'nope'),
        node: fc.constantFrom('node0', 'node2', 'nope'),
        types: fc.subarray(['sys_write', 'block_io'] as const, { minLength: 1 }),
        fromNs: fc.integer({ min: -5, max: 400 }).map((d) => BASE + BigInt(d)),
        toNs: fc.integer({ min: 0, max: 400 }).map((d) => BASE + BigInt(d)),
        minDurationNs: fc.constantFrom(0n, 500n, 501n, BigInt(SLOW_EVENT_NS), 2_500_000n),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(
        filter,
        fc.constantFrom<EventOrder>('asc', 'desc'),
        fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 41, max: 500 })),
        (f, order, limit) => {
          const expected = all.filter((e) => matchesFilter(e, f));
          if (order === 'desc') expected.reverse();
          expect(pageAll(stores, f, order, limit)).toEqual(expected);
          expect(stores.summarize(f)).toEqual({
            count: expected.length,
            firstTs: expected.length ? [...expected].sort(byPosition)[0]!.timestamp_ns : null,
            lastTs: expected.length ? [...expected].sort(byPosition).at(-1)!.timestamp_ns : null,
          });
        },
      ),
      { numRuns: 150 },
    );
  });

  it('iterates lazily in chunks, continuing after a position', () => {
    const spy = jest.spyOn(NodeStore.prototype, 'fetch');
    const iterator = stores.iterate({}, { order: 'desc', chunk: 7 });
    try {
      expect(iterator.next().value).toEqual(all.at(-1));
      expect(spy.mock.results.reduce((n, r) => n + (r.value as unknown[]).length, 0)).toBeLessThanOrEqual(
        3 * 8,
      );
    } finally {
      spy.mockRestore();
    }
    expect([...iterator]).toEqual([...all].reverse().slice(1));
    const traced = [...stores.iterate({ traceId: 'tr1' }, { order: 'asc', chunk: 5 })];
    expect(traced).toEqual(all.filter((e) => e.trace_id === 'tr1'));
    const middle = all[200]!;
    const after = [
      ...stores.iterate({}, { order: 'asc', after: { ts: middle.timestamp_ns, eventId: middle.event_id } }),
    ];
    expect(after).toEqual(all.slice(201));
  });

  it('gets one event by id, and null for ids it does not hold', () => {
    const event = all[123]!;
    expect(stores.get(event.event_id)).toEqual(event);
    expect(stores.get('000000000000' + event.event_id.slice(12))).toBeNull();
    expect(stores.get(event.event_id.slice(0, 28) + 'ffffffffffff')).toBeNull();
    expect(stores.get('nonsense')).toBeNull();
  });

  it('loads no more rows than a page needs, however many nodes feed it', () => {
    const spy = jest.spyOn(NodeStore.prototype, 'fetch');
    const page = stores.page({}, { limit: 100, order: 'asc' });
    const loaded = spy.mock.results.reduce((n, r) => n + (r.value as unknown[]).length, 0);
    spy.mockRestore();
    expect(page.events).toEqual(all.slice(0, 100));
    // each source's first read takes its share of the page; refills take only what is still missing
    expect(loaded).toBeLessThanOrEqual(100 + 3 * 3);
  });
});

describe('NodeStores merge', () => {
  it('refills a source that holds most of a page, in either order', () => {
    writeStore(
      dir.path,
      'many',
      Array.from({ length: 100 }, (_, i) => ({ ts: BASE + BigInt(i), bytes: i })),
    );
    writeStore(dir.path, 'few', [
      { ts: BASE + 50n, bytes: 1000 },
      { ts: BASE + 1000n, bytes: 1001 },
    ]);
    const stores = new NodeStores(dir.path, silentLogger);
    try {
      const all = pageAll(stores, {}, 'asc', 1000);
      // bytes 50 and 1000 share a timestamp: their order is their event ids' (random store ids)
      const tie = all.slice(50, 52);
      expect(tie.map((e) => e.bytes).sort((a, b) => a - b)).toEqual([50, 1000]);
      expect(tie[0]!.event_id < tie[1]!.event_id).toBe(true);
      expect([...all.slice(0, 50), ...all.slice(52)].map((e) => e.bytes)).toEqual([
        ...Array(50).keys(),
        ...Array.from({ length: 49 }, (_, i) => 51 + i),
        1001,
      ]);
      for (const limit of [3, 17, 60, 101]) {
        expect(pageAll(stores, {}, 'asc', limit)).toEqual(all);
        expect(pageAll(stores, {}, 'desc', limit)).toEqual([...all].reverse());
      }
    } finally {
      stores.close();
    }
  });
});

describe('NodeStores data dir', () => {
  function recordingLogger(): { log: Logger; lines: string[] } {
    const lines: string[] = [];
    const log: Logger = {
      ...silentLogger,
      info: (msg, fields) => lines.push(`info ${msg} ${JSON.stringify(fields)}`),
      warn: (msg, fields) => lines.push(`warn ${msg} ${JSON.stringify(fields)}`),
    };
    return { log, lines };
  }

  /** `test` over a live writer's store and the directory that reads it, both closed after. */
  function withLiveStore(test: (writer: StoreWriter, stores: NodeStores) => void): void {
    const writer = StoreWriter.open(dir.path, 'live');
    const stores = new NodeStores(dir.path, silentLogger);
    try {
      test(writer, stores);
    } finally {
      stores.close();
      writer.close();
    }
  }

  it('picks up a node file that appears later, and ignores files that are not stores (logging once)', () => {
    const { log, lines } = recordingLogger();
    writeStore(dir.path, 'a', [{ ts: BASE }]);
    writeFileSync(join(dir.path, 'junk.db'), 'not sqlite at all');
    writeFileSync(join(dir.path, 'notes.txt'), 'hello');
    const stores = new NodeStores(dir.path, log);
    try {
      expect(stores.nodes()).toEqual(['a']);
      writeStore(dir.path, 'b', [{ ts: BASE - 1n }]);
      expect(stores.nodes()).toEqual(['a', 'b']);
      expect(stores.page({}, { limit: 10, order: 'asc' }).events.map((e) => e.node)).toEqual(['b', 'a']);
      expect(lines.filter((l) => l.includes('junk.db'))).toHaveLength(1);
      expect(lines.join('\n')).not.toMatch(/notes\.txt/);
    } finally {
      stores.close();
    }
  });

  it('sees events a live writer commits after the store was opened', () => {
    withLiveStore((writer, stores) => {
      writeEvents(writer, [{ ts: BASE, txn: 'x' }]);
      expect(stores.page({ transactionId: 'x' }, { limit: 10, order: 'asc' }).events).toHaveLength(1);
      writeEvents(writer, [{ ts: BASE + 1n, txn: 'x', service: 'new-service', comm: 'new-comm' }]);
      const [, second] = stores.page({ transactionId: 'x' }, { limit: 10, order: 'asc' }).events;
      expect(second).toMatchObject({ service_name: 'new-service', comm: 'new-comm', transaction_id: 'x' });
    });
  });

  describe('under a wall clock step', () => {
    const wall = useWallStep();

    it('serves a skipped file rewritten in place as a store within the rescan, though the clock stepped an hour back', async () => {
      const elsewhere = join(dir.path, 'elsewhere');
      mkdirSync(elsewhere);
      writeStore(elsewhere, 'fixed', [{ ts: BASE }]);
      const bytes = readFileSync(join(elsewhere, 'fixed.db'));
      writeFileSync(join(dir.path, 'x.db'), 'not sqlite at all');
      const stores = new NodeStores(dir.path, silentLogger);
      try {
        expect(stores.nodes()).toEqual([]);
        wall.step(-HOUR_MS);
        // the same name: the data dir's mtime stays, only the timed rescan sees it
        writeFileSync(join(dir.path, 'x.db'), bytes);
        await waitFor(() => stores.nodes().length > 0, { what: 'the rewritten file served' });
        expect(stores.nodes()).toEqual(['fixed']);
      } finally {
        stores.close();
      }
    });
  });

  it('reads a page from one snapshot of each store: a commit during the page is in the next one, not in it', () => {
    withLiveStore((writer, stores) => {
      // two contexts of one trace: two sources, so the page's reads of the dense one are refilled
      writeEvents(writer, [
        ...Array.from({ length: 150 }, (_, i) => ({ ts: BASE + 10n * BigInt(i), txn: 'a', trace: 'tr' })),
        ...Array.from({ length: 10 }, (_, i) => ({ ts: BASE + 10_000n + BigInt(i), txn: 'b', trace: 'tr' })),
      ]);
      const query = () => stores.page({ traceId: 'tr' }, { limit: 100, order: 'asc' }).events;
      const before = query();
      const late = BASE + 705n;
      const fetch = NodeStore.prototype.fetch;
      const spy = jest.spyOn(NodeStore.prototype, 'fetch').mockImplementationOnce(function (
        this: NodeStore,
        ...args
      ) {
        const rows = fetch.apply(this, args);
        // committed after the page's first read, inside the range its refill reads
        writeEvents(writer, [{ ts: late, txn: 'a', trace: 'tr' }]);
        return rows;
      });
      const during = query();
      expect(spy.mock.calls.length).toBeGreaterThan(2);
      spy.mockRestore();
      expect(during).toEqual(before);
      expect(query().map((e) => e.timestamp_ns)).toContain(late);
    });
  });

  it('lets a snapshot go when the read in it throws', () => {
    withLiveStore((writer, stores) => {
      writeEvents(writer, [{ ts: BASE, txn: 'x' }]);
      const [store] = stores.health().stores;
      expect(() =>
        store!.reading(() => {
          store!.newestTs();
          throw new Error('a reader failed');
        }),
      ).toThrow('a reader failed');
      writeEvents(writer, [{ ts: BASE + 1n, txn: 'x' }]);
      expect(store!.newestTs()).toBe(BASE + 1n);
    });
  });

  it('fails a page over a store damaged mid-read with the StoreError naming it, not the end of its snapshot', () => {
    writeStore(
      dir.path,
      'broken',
      Array.from({ length: 20_000 }, (_, i) => ({ ts: BASE + BigInt(i) * 1000n, txn: 'big' })),
    );
    const stores = new NodeStores(dir.path, silentLogger);
    try {
      expect(stores.nodes()).toEqual(['broken']);
      const path = join(dir.path, 'broken.db');
      damageEventPages(path);
      expect(() => stores.page({ transactionId: 'big' }, { limit: 10_000, order: 'asc' })).toThrow(
        expect.objectContaining({ code: 'E_STORE_CORRUPT', file: path }) as Error,
      );
    } finally {
      stores.close();
    }
  });

  it('answers with nothing while the data dir does not exist, and serves it at once when it appears', () => {
    const missing = join(dir.path, 'missing');
    const stores = new NodeStores(missing, silentLogger);
    try {
      expect(stores.page({}, { limit: 5, order: 'asc' })).toEqual({ events: [], next: null });
      expect(stores.summarize({})).toEqual({ count: 0, firstTs: null, lastTs: null });
      mkdirSync(missing);
      writeStore(missing, 'late', [{ ts: BASE }]);
      // no timed rescan waited for: the dir's appearance is the change
      expect(stores.nodes()).toEqual(['late']);
    } finally {
      stores.close();
    }
  });

  it("reads a store's schema version again on every look: the agent may upgrade it meanwhile", () => {
    writeStore(dir.path, 'v', [{ ts: BASE }]);
    const reader = new Database(join(dir.path, 'v.db'), { readonly: true });
    const writer = new Database(join(dir.path, 'v.db'));
    try {
      const version = schemaVersionOf(reader);
      expect(version).toBeGreaterThan(0);
      writer.pragma(`user_version = ${version + 1}`);
      expect(schemaVersionOf(reader)).toBe(version + 1);
      expect(schemaVersionOf(writer)).toBe(version + 1);
    } finally {
      reader.close();
      writer.close();
    }
  });
});
