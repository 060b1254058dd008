import { StoreWriter } from '../../agent/store/store-writer';
import { byPosition } from '../support/event-match';
import { writeEvents, writeStore, type TestEvent } from '../support/event-store';
import { fetchAllPages, get, readEvents, startEventsServer, useEventsBackends } from '../support/events-http';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-events-paging-');
/* from the node files, and from the same files shipped to ClickHouse (shipped again as they grow) */
const BACKENDS = useEventsBackends();
const BASE = 1795345678123456789n;

/** `count` events from `first`, 1 µs apart with some ts repeated, each tagged by a unique bytes value. */
function run(first: number, count: number, tag: number): TestEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    ts: BASE + BigInt(Math.floor((first + i) / 3) * 1000),
    bytes: tag + first + i,
    txn: i % 2 ? `tx${(first + i) % 40}` : null,
    service: `svc${i % 4}`,
  }));
}

describe.each(BACKENDS)('paging GET /api/events from $kind', (backend) => {
  it('pages through 10k+ events while writers append, with no gap and no repeat', async () => {
    const writers = [StoreWriter.open(dir.path, 'n1'), StoreWriter.open(dir.path, 'n2')];
    const written = new Set<number>();
    const append = (first: number, count: number) =>
      writers.forEach((writer, w) => {
        const events = run(first, count, (w + 1) * 1_000_000);
        writeEvents(writer, events);
        events.forEach((e) => written.add(e.bytes!));
      });
    append(0, 6000);
    const server = await startEventsServer(dir.path, backend);
    try {
      let next = 6000;
      const events = await fetchAllPages(server.url, 'limit=1000', async (page) => {
        // later timestamps than anything stored, as an agent appends them
        if (page < 10) append(next, 250);
        next += 250;
        await server.sync();
      });
      expect(written.size).toBe(2 * (6000 + 10 * 250));
      expect(new Set(events.map((e) => e.event_id)).size).toBe(events.length);
      expect(new Set(events.map((e) => e.bytes))).toEqual(written);
      expect([...events].sort(byPosition)).toEqual(events);

      const filtered = await fetchAllPages(server.url, 'limit=777&transaction_id=tx7&order=desc');
      expect(filtered).toEqual(events.filter((e) => e.transaction_id === 'tx7').reverse());
    } finally {
      await server.close();
      writers.forEach((w) => w.close());
    }
  });

  it('serves a full page of 10,000 events', async () => {
    writeStore(dir.path, 'big', run(0, 10_500, 0));
    const server = await startEventsServer(dir.path, backend);
    try {
      const first = await get(`${server.url}/api/events?limit=10000`);
      expect(first.status).toBe(200);
      const body = readEvents(first.text.replace(/"(timestamp|duration)_ns":(\d+)/g, '"$1_ns":"$2"'));
      expect(body.events).toHaveLength(10_000);
      expect(body.events.map((e) => e.bytes)).toEqual(Array.from({ length: 10_000 }, (_, i) => i));
      const rest = readEvents(
        (await get(`${server.url}/api/events?int64=string&cursor=${body.next_cursor}`)).text,
      );
      expect(rest.events.map((e) => e.bytes)).toEqual(Array.from({ length: 500 }, (_, i) => 10_000 + i));
      expect(rest.next_cursor).toBeNull();
    } finally {
      await server.close();
    }
  });

  it('pages ties on timestamp across nodes exactly, in both orders and any page size', async () => {
    for (const node of ['a', 'b', 'c']) {
      writeStore(
        dir.path,
        node,
        Array.from({ length: 12 }, (_, i) => ({ ts: BASE + BigInt(i % 3), bytes: i, service: `s${i % 2}` })),
      );
    }
    const server = await startEventsServer(dir.path, backend);
    try {
      const all = await fetchAllPages(server.url, 'limit=10000');
      expect(all).toHaveLength(36);
      expect([...all].sort(byPosition)).toEqual(all);
      for (const limit of [1, 2, 5, 7, 35, 36]) {
        expect(await fetchAllPages(server.url, `limit=${limit}`)).toEqual(all);
        expect(await fetchAllPages(server.url, `limit=${limit}&order=desc`)).toEqual([...all].reverse());
        expect(await fetchAllPages(server.url, `limit=${limit}&service=s1`)).toEqual(
          all.filter((e) => e.service_name === 's1'),
        );
      }
    } finally {
      await server.close();
    }
  });

  it('finds a node file that appears while the daemon runs', async () => {
    writeStore(dir.path, 'first', [{ ts: BASE + 5n }]);
    const server = await startEventsServer(dir.path, backend);
    try {
      expect((await fetchAllPages(server.url, '')).map((e) => e.node)).toEqual(['first']);
      writeStore(dir.path, 'second', [{ ts: BASE }, { ts: BASE + 9n }]);
      await server.sync();
      const deadline = Date.now() + 5000;
      let nodes: string[] = [];
      while (Date.now() < deadline && nodes.length < 3) {
        nodes = (await fetchAllPages(server.url, '')).map((e) => e.node);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(nodes).toEqual(['second', 'first', 'second']);
      expect((await fetchAllPages(server.url, 'node=second')).map((e) => e.timestamp_ns)).toEqual([
        BASE,
        BASE + 9n,
      ]);
    } finally {
      await server.close();
    }
  });
});
