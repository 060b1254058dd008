/**
 * Shipping a node store to a real ClickHouse (Debian's clickhouse-server,
 * started on free ports by the test): schema and migrations, quoting against
 * the server's own lexer, every event exactly once as a reader sees it, and
 * catching up after the server was down while events kept being stored.
 */
import fc from 'fast-check';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { StoreWriter } from '../../agent/store/store-writer';
import { Shipper } from '../../agent/ship/shipper';
import { quoteString } from '../../core/clickhouse/quote';
import { CLICKHOUSE_SCHEMA_VERSION, migrateClickHouse } from '../../core/clickhouse/schema';
import { firstUnshippedSeq } from '../../core/store/schema';
import { clickhouseAvailable, useClickHouse } from '../support/clickhouse-server';
import { writeEvents, type TestEvent } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const describeCh = clickhouseAvailable ? describe : describe.skip;
if (!clickhouseAvailable)
  console.warn('SKIPPED: clickhouse-server is not installed (make setup installs it)');

const BASE = 1_763_856_000_000_000_000n;

function events(from: number, count: number): TestEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    ts: BASE + BigInt(from + i) * 1000n + 7n,
    txn: `tx-${(from + i) % 50}`,
    trace: (from + i) % 3 === 0 ? `trace-${(from + i) % 7}` : null,
    service: `svc-${(from + i) % 4}`,
  }));
}

describeCh('shipping to ClickHouse', () => {
  jest.setTimeout(90_000);
  const dir = useTempDir();
  const clickhouse = useClickHouse();

  it('migrates once and records the version', async () => {
    const ch = clickhouse.server.client('mig');
    expect(await migrateClickHouse(ch)).toBe(CLICKHOUSE_SCHEMA_VERSION);
    expect(await migrateClickHouse(ch)).toBe(CLICKHOUSE_SCHEMA_VERSION);
    const versions = await ch.rows<{ version: number }>('SELECT version FROM kreplay_migrations');
    expect(versions).toEqual(
      Array.from({ length: CLICKHOUSE_SCHEMA_VERSION }, (_, i) => ({ version: i + 1 })),
    );
    const tables = await ch.rows<{ name: string }>(
      'SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name',
    );
    expect(tables.map((t) => t.name)).toEqual([
      'events',
      'events_by_trace',
      'events_by_trace_feed',
      'events_by_transaction',
      'events_by_transaction_feed',
      'kreplay_migrations',
    ]);
  });

  it("the server's lexer reads every quoted value back byte for byte", async () => {
    const ch = clickhouse.server.client('default');
    const samples = fc.sample(fc.uint8Array({ maxLength: 200 }), 300);
    samples.push(Buffer.from("'; DROP TABLE x; --\\\0\xff"), Buffer.from([0xc3, 0x28, 0x00, 0x27, 0x5c]));
    const sql = `SELECT ${samples.map((s, i) => `hex(${quoteString(s)}) AS v${i}`).join(', ')}`;
    const [row] = await ch.rows<Record<string, string>>(sql);
    samples.forEach((s, i) => expect(row![`v${i}`]).toBe(Buffer.from(s).toString('hex').toUpperCase()));
  });

  it('ships every event once, resumes from its cursor, and a re-sent batch never shows twice', async () => {
    const ch = clickhouse.server.client('ship');
    const writer = StoreWriter.open(dir.path, 'node-a');
    const path = join(dir.path, 'node-a.db');
    try {
      for (let i = 0; i < 25_000; i += 5000) writeEvents(writer, events(i, 5000));
      const shipper = new Shipper(path, ch, { maxDelayMs: 100 });
      shipper.start();
      await waitFor(() => shipper.status().shipped === 25_000, { what: '25,000 shipped', timeoutMs: 30_000 });
      expect(shipper.status()).toMatchObject({ lagEvents: 0, lagSeconds: 0, state: 'shipping' });
      await shipper.stop();
      expect(firstUnshippedSeq(writer.db)).toBe(25_001);

      const [all] = await ch.rows<{ n: string; ids: string; min: string; max: string }>(
        'SELECT count() AS n, uniqExact(event_id) AS ids, min(timestamp_ns) AS min, max(timestamp_ns) AS max FROM events FINAL',
      );
      expect(all).toEqual({
        n: '25000',
        ids: '25000',
        min: String(BASE + 7n),
        max: String(BASE + 24_999_000n + 7n),
      });

      // the agent died after ClickHouse took a batch but before the cursor moved: all is sent again
      const db = new Database(path);
      db.prepare('DELETE FROM ship_cursors').run();
      db.close();
      const again = new Shipper(path, ch, { maxDelayMs: 100 });
      again.start();
      await waitFor(() => again.status().shipped === 25_000, { what: 're-sent', timeoutMs: 30_000 });
      await again.stop();
      const [raw] = await ch.rows<{ n: string }>('SELECT count() AS n FROM events');
      const [final] = await ch.rows<{ n: string }>('SELECT count() AS n FROM events FINAL');
      expect(final!.n).toBe('25000');
      expect(Number(raw!.n)).toBeGreaterThanOrEqual(25_000); // merges may already have collapsed some

      const [tx] = await ch.rows<{ n: string }>(
        `SELECT count() AS n FROM events_by_transaction FINAL WHERE transaction_id = ${quoteString('tx-7')}`,
      );
      expect(tx!.n).toBe('500');
    } finally {
      writer.close();
    }
  });

  it('keeps storing while ClickHouse is down and catches up exactly when it returns', async () => {
    const ch = clickhouse.server.client('outage');
    const writer = StoreWriter.open(dir.path, 'node-b');
    const shipper = new Shipper(join(dir.path, 'node-b.db'), ch, {
      maxDelayMs: 100,
      retryInitialMs: 100,
      retryMaxMs: 400,
    });
    try {
      writeEvents(writer, events(0, 3000));
      shipper.start();
      await waitFor(() => shipper.status().shipped === 3000, { what: 'first shipped', timeoutMs: 30_000 });
      await clickhouse.server.stop();
      for (let i = 3000; i < 15_000; i += 3000) writeEvents(writer, events(i, 3000));
      await waitFor(() => shipper.status().state === 'retrying', { what: 'retrying', timeoutMs: 30_000 });
      const down = shipper.status();
      expect(down.lagEvents).toBe(12_000);
      expect(down.lastError).toMatch(/unreachable/);
      await clickhouse.server.start();
      await waitFor(() => shipper.status().lagEvents === 0, { what: 'caught up', timeoutMs: 30_000 });
      const [final] = await ch.rows<{ n: string; ids: string }>(
        'SELECT count() AS n, uniqExact(event_id) AS ids FROM events FINAL',
      );
      expect(final).toEqual({ n: '15000', ids: '15000' });
    } finally {
      await shipper.stop();
      writer.close();
    }
  });

  it('reports no lag once the store cap removed unshipped events up to the newest', async () => {
    const ch = clickhouse.server.client('capped');
    const path = join(dir.path, 'node-c.db');
    const writer = StoreWriter.open(dir.path, 'node-c', {
      retention: { retainNs: 0, retainContextNs: 0, maxStore: { bytes: 256 * 1024 } },
      now: () => BASE + 3_600_000_000_000n,
    });
    try {
      // shipped: transactions (the context tier, pruned last), newest in time
      writeEvents(writer, events(1_000_000, 500));
      let shipper = new Shipper(path, ch, { maxDelayMs: 0 });
      shipper.start();
      await waitFor(() => shipper.status().shipped === 500, { what: 'first shipped', timeoutMs: 30_000 });
      await shipper.stop();
      // not shipped: background events, older in time but later in seq; the cap takes them first
      const background = events(0, 20_000).map((e) => ({ ...e, txn: null, trace: null }));
      for (let i = 0; i < background.length; i += 5000) {
        writeEvents(writer, background.slice(i, i + 5000));
        writer.prune(1_000_000);
      }
      const seqs = writer.db
        .prepare(
          "SELECT max(seq) AS top, (SELECT value FROM meta WHERE key = 'next_seq') AS next FROM events",
        )
        .get() as { top: number | null; next: string };
      const cursor = firstUnshippedSeq(writer.db)!;
      // the bug's shape: the cursor lies past every remaining seq, yet seqs were committed after it
      expect(seqs.top === null || seqs.top < cursor).toBe(true);
      expect(Number(seqs.next)).toBeGreaterThan(cursor);

      shipper = new Shipper(path, ch, { maxDelayMs: 0 });
      shipper.start();
      expect(shipper.status()).toMatchObject({ lagEvents: 0, lagSeconds: 0 });
      // what arrives afterwards ships as usual and the lag returns to 0
      writeEvents(writer, events(2_000_000, 300));
      await waitFor(() => shipper.status().shipped === 800, { what: 'new ones shipped', timeoutMs: 30_000 });
      expect(shipper.status()).toMatchObject({ lagEvents: 0, lagSeconds: 0 });
      await shipper.stop();
      const [final] = await ch.rows<{ n: string }>('SELECT count() AS n FROM events FINAL');
      expect(final!.n).toBe('800');
    } finally {
      writer.close();
    }
  });
});
