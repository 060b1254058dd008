/**
 * Targets live as long as their events: the decoder remembers a bounded number, each batch stamps
 * what it used per tier, and retention removes a target with its tiers' last events (a host that
 * writes a new file a request would otherwise grow the agent's memory and the store for ever).
 */
import Database from 'better-sqlite3';
import { TargetDictionary } from '../../agent/ingest/dictionary';
import { EventBatch } from '../../agent/ingest/event-batch';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import { targetKindCode } from '../../core/model';
import {
  MIGRATIONS,
  NEXT_TARGET_ID_META,
  SCHEMA_VERSION,
  TARGET_LIFETIME_SCHEMA_VERSION,
  openWriteStore,
} from '../../core/store/schema';
import { openRetainingWriter, writeEvents, type TestEvent } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-target-lifetime-');
const HOUR = 3600n * 1_000_000_000n;
const NOW = 1_795_345_678_000_000_000n;
const FILE = targetKindCode('file');

const write = (ts: bigint, path: string, txn: string | null = null): TestEvent => ({
  ts,
  txn,
  target: ['file', path],
});

const openWriter = (name = 'n') => openRetainingWriter(dir.path, name, NOW);

function readTargets(path: string) {
  const db = new Database(path, { readonly: true });
  try {
    return {
      rows: db
        .prepare('SELECT id, value, last_background_ns, last_context_ns FROM targets ORDER BY id')
        .safeIntegers(true)
        .raw()
        .all() as [bigint, string, bigint | null, bigint | null][],
      // events whose target id names no row: a reader would show them without their target
      dangling: db
        .prepare(
          'SELECT count(*) FROM events e WHERE e.target IS NOT NULL AND NOT EXISTS (SELECT 1 FROM targets t WHERE t.id = e.target)',
        )
        .pluck()
        .get() as number,
    };
  } finally {
    db.close();
  }
}

describe('TargetDictionary', () => {
  it('remembers at most its capacity: a target used again keeps its id, one forgotten gets a fresh one', () => {
    const d = new TargetDictionary(1, 8);
    const hot = d.entry(FILE, '/var/log/app.log').id;
    for (let i = 0; i < 100; i++) {
      d.entry(FILE, `/tmp/upload-${i}`);
      // used again between the new ones: never forgotten
      expect(d.entry(FILE, '/var/log/app.log').id).toBe(hot);
      expect(d.size).toBeLessThanOrEqual(8);
    }
    const first = d.entry(FILE, '/tmp/upload-0');
    expect(first.id).toBeGreaterThan(100);
    expect(first.value).toBe('/tmp/upload-0');
  });

  it('stamps a target it forgot by id alone, and takes one met again by its value for a new target', () => {
    const d = new TargetDictionary(1, 4);
    const old = d.entry(FILE, '/tmp/a');
    const hot = d.entry(FILE, '/tmp/b');
    // the kernel names both by id; /tmp/b is met again by its value, so it moves to the young generation
    d.useId(old.id, 0, false);
    for (const name of ['/tmp/c', '/tmp/b', '/tmp/d', '/tmp/e']) d.entry(FILE, name);
    d.useId(hot.id, 3, false);
    d.useId(old.id, 5, true);
    d.useId(old.id, 7, true);
    expect(d.takeUsed(100n)).toEqual([
      [old.id, FILE, '/tmp/a', 100n, 107n],
      [hot.id, FILE, '/tmp/b', 103n, null],
    ]);
    // /tmp/a's generation went: the kernel's writes through its id are stamped without a value
    d.useId(old.id, 1, false);
    expect(d.takeUsed(200n)).toEqual([[old.id, 0, null, 201n, null]]);
    expect(d.entry(FILE, '/tmp/a').id).not.toBe(old.id);
  });

  it("stamps each target a batch used with its tiers' latest ts, and starts over for the next batch", () => {
    const d = new TargetDictionary();
    const log = d.entry(FILE, '/var/log/app.log');
    const sock = d.entry(targetKindCode('socket'), 'tcp 10.0.0.5:5432');
    d.use(log, 30, false);
    d.use(log, 10, false);
    d.use(log, -5, true);
    d.use(sock, 7, true);
    expect(d.takeUsed(1000n)).toEqual([
      [log.id, FILE, '/var/log/app.log', 1030n, 995n],
      [sock.id, targetKindCode('socket'), 'tcp 10.0.0.5:5432', null, 1007n],
    ]);
    d.use(sock, 1, false);
    expect(d.takeUsed(2000n)).toEqual([
      [sock.id, targetKindCode('socket'), 'tcp 10.0.0.5:5432', 2001n, null],
    ]);
    // a batch dropped before it was taken (a failed writer): its uses do not reach the next one
    d.use(log, 50, false);
    d.batchStarted();
    d.use(sock, 2, true);
    expect(d.takeUsed(3000n)).toEqual([
      [sock.id, targetKindCode('socket'), 'tcp 10.0.0.5:5432', null, 3002n],
    ]);
  });
});

describe("a target's rows in the store", () => {
  it("go with their tiers' last events, and stay while the other tier still has some", () => {
    const writer = openWriter();
    writeEvents(writer, [
      write(NOW - 10n * HOUR, '/tmp/old-background'),
      write(NOW - 10n * HOUR, '/tmp/old-context', 'txn-a'),
      write(NOW - 10n * HOUR, '/var/lib/both'),
      write(NOW - 7n * HOUR, '/var/lib/both', 'txn-b'),
      write(NOW - HOUR, '/var/log/fresh'),
    ]);
    expect(readTargets(writer.path).rows.map((r) => r[1])).toEqual([
      '/tmp/old-background',
      '/tmp/old-context',
      '/var/lib/both',
      '/var/log/fresh',
    ]);
    writer.prune(1_000_000);
    writer.close();
    const { rows, dangling } = readTargets(writer.path);
    expect(rows).toEqual([
      // its background event went past --retain; its context event is within --retain-context
      [3n, '/var/lib/both', null, NOW - 7n * HOUR],
      [4n, '/var/log/fresh', NOW - HOUR, null],
    ]);
    expect(dangling).toBe(0);
  });

  it('comes back, same id and value, with the next batch that uses a target retention removed', () => {
    const writer = openWriter();
    writeEvents(writer, [write(NOW - 10n * HOUR, '/tmp/spool/1'), write(NOW - HOUR, '/var/log/fresh')]);
    writer.prune(1_000_000);
    expect(readTargets(writer.path).rows.map((r) => r[1])).toEqual(['/var/log/fresh']);
    // the decoder still remembers /tmp/spool/1 under id 1
    writeEvents(writer, [write(NOW, '/tmp/spool/1')]);
    writer.close();
    const { rows, dangling } = readTargets(writer.path);
    expect(rows).toEqual([
      [1n, '/tmp/spool/1', NOW, null],
      [2n, '/var/log/fresh', NOW - HOUR, null],
    ]);
    expect(dangling).toBe(0);
  });

  it('come back in every transaction of a batch split under a small cap, after a prune between two took them', () => {
    // a 4 MiB cap: 4,096 rows a transaction; --retain 6 h prunes between them
    const writer = StoreWriter.open(dir.path, 'split', {
      retention: { retainNs: Number(6n * HOUR), retainContextNs: 0, maxStore: { bytes: 4 * 1024 * 1024 } },
      now: () => NOW,
    });
    // 10,000 writes of one target from 10 h ago, newest first (rows of several CPUs come out of
    // order): the prune after the first transaction takes its rows, the newest of the batch, and
    // with them the target's row; the next transactions' rows refer to it
    const rows = 10_000;
    const batch = new EventBatch(rows);
    batch.clear(NOW - 10n * HOUR);
    const entry = writer.targets.entry(FILE, '/var/spool/old.log');
    for (let i = 0; i < rows; i++) {
      const tsOffset = rows - i;
      writer.targets.use(entry, tsOffset, false);
      batch.pushSysWrite({
        tsOffset,
        dur: 1,
        service: writer.services.id('s'),
        ctx: 0,
        pid: 1,
        tid: 1,
        comm: writer.comms.id('w'),
        bytes: 1,
        fd: 3,
        ret: 1,
        syscall: 1,
        target: entry.id,
      });
    }
    writer.writeBatch(batch);
    writer.close();
    const db = new Database(writer.path, { readonly: true });
    const pruned = db.prepare('SELECT count(*) FROM pruned').pluck().get() as number;
    const events = db.prepare('SELECT count(*) FROM events').pluck().get() as number;
    db.close();
    expect(pruned).toBe(2);
    expect(events).toBe(rows - 2 * 4096);
    const { rows: targets, dangling } = readTargets(writer.path);
    expect(targets).toEqual([[1n, '/var/spool/old.log', NOW - 10n * HOUR + BigInt(rows), null]]);
    expect(dangling).toBe(0);
  });

  it('are stamped by id for a target the decoder forgot; gone, its events are stored without it, counted', () => {
    const writer = openWriter('forgot');
    writeEvents(writer, [write(NOW - 10n * HOUR, '/tmp/gone'), write(NOW - HOUR, '/var/log/kept')]);
    writer.prune(1_000_000);
    const batch = new EventBatch(4);
    batch.clear(NOW);
    const service = writer.services.id('s');
    const comm = writer.comms.id('w');
    for (const target of [1, 2, 1])
      batch.pushSysWrite({
        tsOffset: 0,
        dur: 1,
        service,
        ctx: 0,
        pid: 1,
        tid: 1,
        comm,
        bytes: 1,
        fd: 3,
        ret: 1,
        syscall: 1,
        target,
      });
    writer.writeBatch(batch, {
      services: [],
      comms: [],
      contexts: [],
      targets: [
        [1, FILE, null, NOW, null],
        [2, FILE, null, NOW, null],
      ],
      containers: [],
    });
    writer.close();
    expect(writer.lostTargets).toBe(2);
    const { rows, dangling } = readTargets(writer.path);
    expect(rows).toEqual([[2n, '/var/log/kept', NOW, null]]);
    expect(dangling).toBe(0);
    const db = new Database(writer.path, { readonly: true });
    expect(db.prepare('SELECT target FROM events WHERE ts = ? ORDER BY seq').pluck().all(NOW)).toEqual([
      null,
      2,
      null,
    ]);
    db.close();
  });

  it('never give a removed id to another target, after a restart too', () => {
    const writer = openWriter('ids');
    writeEvents(writer, [write(NOW - HOUR, '/var/log/kept'), write(NOW - 10n * HOUR, '/tmp/newest-id')]);
    writer.prune(1_000_000);
    writer.close();
    expect(readTargets(writer.path).rows.map((r) => r[0])).toEqual([1n]);
    const again = openWriter('ids');
    expect(again.targets.entry(FILE, '/tmp/other').id).toBe(3);
    again.close();
  });

  it('upgrades a store of the previous version: each target stamped from its events, one no event uses gone', () => {
    const path = storePath(dir.path, 'v11');
    const old = new Database(path);
    // v11's migration keys the contexts already stored: there are none
    old.function('kreplay_context_key', (_id: unknown) => null);
    for (const migration of MIGRATIONS.slice(0, TARGET_LIFETIME_SCHEMA_VERSION - 1)) old.exec(migration);
    old.exec(`INSERT INTO meta VALUES ('store_id', 'a1b2c3d4e5f6'), ('node', 'v11'), ('next_seq', '1')`);
    old.exec(`INSERT INTO contexts (id, transaction_id, transaction_key) VALUES (1, 'txn', 7)`);
    old.exec(
      `INSERT INTO targets (id, kind, value) VALUES (1, ${FILE}, '/var/log/a'), (2, ${FILE}, '/var/log/b'), (3, ${FILE}, '/tmp/gone')`,
    );
    const event = old.prepare(
      'INSERT INTO events (ts, seq, type, dur, service, pid, tid, comm, bytes, ctx, target) VALUES (?, ?, 1, 1, 1, 1, 1, 1, 1, ?, ?)',
    );
    event.run(NOW - 3n * HOUR, 1, null, 1);
    event.run(NOW - HOUR, 2, null, 1);
    event.run(NOW - 2n * HOUR, 3, 1, 1);
    event.run(NOW, 4, null, 2);
    old.pragma(`user_version = ${TARGET_LIFETIME_SCHEMA_VERSION - 1}`);
    old.close();

    const { db } = openWriteStore(path, 'v11');
    try {
      expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      expect(
        db
          .prepare('SELECT id, value, last_background_ns, last_context_ns FROM targets ORDER BY id')
          .safeIntegers(true)
          .raw()
          .all(),
      ).toEqual([
        [1n, '/var/log/a', NOW - HOUR, NOW - 2n * HOUR],
        [2n, '/var/log/b', NOW, null],
      ]);
      // a value may have several rows now
      db.prepare(`INSERT INTO targets (id, kind, value) VALUES (4, ${FILE}, '/var/log/a')`).run();
      expect(db.prepare(`SELECT value FROM meta WHERE key = '${NEXT_TARGET_ID_META}'`).get()).toBeUndefined();
      expect(StoreWriter.firstFreeTargetId(db)).toBe(5);
    } finally {
      db.close();
    }
  });
});
