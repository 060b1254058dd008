/** Retention through the real writer: tiers by age, the size cap by measured file size, pruned rows. */
import { storeFileBytes } from '../../core/store/store-bytes';
import Database from 'better-sqlite3';
import { EventBatch } from '../../agent/ingest/event-batch';
import { StoreWriter } from '../../agent/store/store-writer';
import { openRetainingWriter } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();
const HOUR = 3600n * 1_000_000_000n;
const NOW = 1_795_345_678_000_000_000n;
const MiB = 1024 * 1024;

/** `rows` sys_writes from `startNs` on, `stepNs` apart; every `contextEvery`-th carries a transaction. */
function batchOf(writer: StoreWriter, startNs: bigint, rows: number, stepNs: number, contextEvery: number) {
  const batch = new EventBatch(rows);
  batch.clear(startNs);
  const service = writer.services.id('svc');
  const comm = writer.comms.id('w');
  for (let i = 0; i < rows; i++) {
    batch.pushSysWrite({
      tsOffset: i * stepNs,
      dur: 1000 + i,
      service,
      ctx: i % contextEvery === 0 ? writer.contexts.id(`t${startNs}-${i}`, null) : 0,
      pid: 1,
      tid: 1,
      comm,
      bytes: 100,
      fd: 1,
      ret: 100,
      syscall: 1,
    });
  }
  return batch;
}

interface Pruned {
  reason: string;
  from_ns: bigint;
  to_ns: bigint;
  background: bigint;
  context: bigint;
}

function readBack(path: string) {
  const db = new Database(path, { readonly: true });
  try {
    const oldest = (where: string) =>
      db.prepare(`SELECT min(ts) FROM events WHERE ${where}`).pluck().safeIntegers(true).get() as
        bigint | null;
    return {
      pruned: db.prepare('SELECT * FROM pruned ORDER BY id').safeIntegers(true).all() as Pruned[],
      background: db.prepare('SELECT count(*) FROM events WHERE ctx IS NULL').pluck().get() as number,
      context: db.prepare('SELECT count(*) FROM events WHERE ctx IS NOT NULL').pluck().get() as number,
      contexts: db.prepare('SELECT count(*) FROM contexts').pluck().get() as number,
      oldestBackground: oldest('ctx IS NULL'),
      oldestContext: oldest('ctx IS NOT NULL'),
    };
  } finally {
    db.close();
  }
}

const sum = (rows: Pruned[], key: 'background' | 'context') => rows.reduce((n, r) => n + Number(r[key]), 0);

describe('retention', () => {
  it('removes background events past --retain and context events past --retain-context, with pruned rows', () => {
    const writer = openRetainingWriter(dir.path, 'n', NOW);
    // 10 hours of events, one a minute, every 4th with a transaction.
    writer.writeBatch(batchOf(writer, NOW - 10n * HOUR, 600, 60e9, 4));
    writer.prune(1_000_000);
    writer.close();

    const after = readBack(writer.path);
    expect(after.oldestBackground! >= NOW - 6n * HOUR).toBe(true);
    expect(after.oldestContext! >= NOW - 8n * HOUR).toBe(true);
    expect(after.oldestContext! < NOW - 6n * HOUR).toBe(true); // context outlives background
    expect(after.pruned.map((p) => p.reason)).toEqual(['retain', 'retain-context']);
    // 4 h of background (180 of every 240 minutes) and 2 h of context (30 of 120)
    expect(sum(after.pruned, 'background')).toBe(180);
    expect(sum(after.pruned, 'context')).toBe(30);
    expect(after.background + after.context).toBe(600 - 210);
    expect(after.pruned[0]!.from_ns).toBe(NOW - 10n * HOUR + 60_000_000_000n);
    expect(after.pruned[0]!.to_ns < NOW - 6n * HOUR).toBe(true);
  });

  // The cap takes the oldest whatever their time: after the wall clock stepped back, every stored
  // event is stamped after the prune's now, and background still goes first.
  // After a step back mid-run the new events are stamped before those the cap already took.
  it.each([
    ['', 0n, null],
    [', events stamped after the prune (the wall clock stepped back)', 10n * 1_000_000_000n, null],
    [', the wall clock stepped back an hour half way', 0n, 40],
  ])(
    'keeps the file under --max-store-bytes, background first, measured on disk%s',
    (_, aheadNs, stepBackAt) => {
      // a cap this small gets SQLite's 4 KiB pages (newStorePageBytes), with room for a whole batch
      const cap = 4 * MiB;
      let now = NOW;
      const writer = StoreWriter.open(dir.path, 'n', {
        retention: { retainNs: 0, retainContextNs: 0, maxStore: { bytes: cap } },
        now: () => now,
      });
      const lastPruned = writer.db.prepare('SELECT coalesce(max(id), 0) FROM pruned').pluck();
      const contextPrunedSince = writer.db
        .prepare('SELECT coalesce(sum(context), 0) FROM pruned WHERE id > ?')
        .pluck();
      const background = writer.db.prepare('SELECT count(*) FROM events WHERE ctx IS NULL').pluck();
      let maxBytes = 0;
      let written = 0;
      for (let b = 0; b < 80; b++) {
        if (b === stepBackAt) now -= HOUR;
        const batch = batchOf(writer, now + aheadNs, 5000, 1000, 10);
        writer.writeBatch(batch);
        written += batch.count;
        const pruned = lastPruned.get();
        writer.prune(batch.count);
        // background first: a prune that took context events left no background event
        if ((contextPrunedSince.get(pruned) as number) > 0) expect(background.get()).toBe(0);
        maxBytes = Math.max(maxBytes, storeFileBytes(writer.path));
        now += 5_000_000n;
      }
      writer.close();
      const after = readBack(writer.path);

      expect(written).toBe(400_000);
      expect(maxBytes).toBeLessThanOrEqual(cap);
      expect(after.pruned.length).toBeGreaterThan(0);
      expect(after.pruned.every((p) => p.reason === 'max-store-bytes')).toBe(true);
      // Background goes first: the oldest context events outlive every background event pruned. Not
      // after a step back: a batch stored after the cap took its last context events of the new
      // stamps holds background events stamped before the context events left (checked per prune above)
      if (stepBackAt === null) expect(after.oldestContext! < after.oldestBackground!).toBe(true);
      else expect(after.context).toBeGreaterThan(0);
      const removed = sum(after.pruned, 'background') + sum(after.pruned, 'context');
      expect(after.background + after.context + removed).toBe(written);
      // Contexts left without events went with them: the dictionary does not outgrow the cap.
      expect(after.contexts).toBe(after.context);
    },
  );

  /** A shipping destination whose cursor stands at `nextSeq` (what the shipper writes after an acknowledged batch). */
  function shippedUpTo(writer: StoreWriter, nextSeq: bigint): void {
    writer.db
      .prepare(
        "INSERT OR REPLACE INTO ship_cursors (destination, next_seq, shipped, updated_ns) VALUES ('ch', ?, 0, 0)",
      )
      .run(nextSeq);
  }

  const oldest = (writer: StoreWriter) =>
    writer.db.prepare('SELECT min(seq) AS seq, min(ts) AS ts FROM events').safeIntegers(true).get() as {
      seq: bigint;
      ts: bigint;
    };

  it('keeps events not yet shipped past --retain and --retain-context', () => {
    const writer = StoreWriter.open(dir.path, 'n', {
      retention: { retainNs: Number(HOUR), retainContextNs: Number(HOUR), maxStore: { bytes: 0 } },
      now: () => NOW,
    });
    // 10 hours, one event a minute, seq in time order; the fleet store has the first 120
    writer.writeBatch(batchOf(writer, NOW - 10n * HOUR, 600, 60e9, 4));
    const first = oldest(writer).seq;
    shippedUpTo(writer, first + 120n);
    const { steps } = writer.prune(1_000_000);
    expect(steps.reduce((n, st) => n + st.background + st.context, 0)).toBe(120);
    expect(steps.every((st) => st.unshipped === 0)).toBe(true);
    expect(oldest(writer)).toEqual({ seq: first + 120n, ts: NOW - 10n * HOUR + 120n * 60_000_000_000n });

    // once shipped, they go as the retention times say
    shippedUpTo(writer, first + 600n);
    writer.prune(1_000_000);
    expect(oldest(writer).ts >= NOW - HOUR).toBe(true);
    writer.close();
  });

  it('reads where shipping stands only when a step has rows to remove (the idle writer prunes every second)', () => {
    const writer = StoreWriter.open(dir.path, 'n', {
      retention: { retainNs: Number(HOUR), retainContextNs: Number(HOUR), maxStore: { bytes: 0 } },
      now: () => NOW,
    });
    shippedUpTo(writer, 0n);
    // ten minutes of events, none past the retention times
    writer.writeBatch(batchOf(writer, NOW - 600_000_000_000n, 600, 1e9, 4));
    const prepared: string[] = [];
    const prepare = writer.db.prepare.bind(writer.db);
    jest.spyOn(writer.db, 'prepare').mockImplementation(((sql: string) => {
      prepared.push(sql);
      return prepare(sql);
    }) as typeof writer.db.prepare);
    const pragma = jest.spyOn(writer.db, 'pragma');
    for (let i = 0; i < 100; i++) expect(writer.prune(1000).steps).toEqual([]);
    expect(prepared.filter((sql) => sql.includes('ship_cursors'))).toEqual([]);
    expect(pragma).not.toHaveBeenCalled();
    jest.restoreAllMocks();
    // nothing was removed
    const later = readBack(writer.path);
    expect(later.background + later.context).toBe(600);
    writer.close();
  });

  it('lets the cap remove unshipped events, and counts them', () => {
    let now = NOW;
    const writer = StoreWriter.open(dir.path, 'n', {
      retention: { retainNs: 0, retainContextNs: 0, maxStore: { bytes: 4 * MiB } },
      now: () => now,
    });
    shippedUpTo(writer, 0n); // a destination that never acknowledged anything
    let unshipped = 0;
    let removed = 0;
    for (let b = 0; b < 60; b++) {
      writer.writeBatch(batchOf(writer, now, 5000, 1000, 10));
      for (const step of writer.prune(5000).steps) {
        unshipped += step.unshipped;
        removed += step.background + step.context;
      }
      now += 5_000_000n;
    }
    writer.close();
    expect(removed).toBeGreaterThan(0);
    expect(unshipped).toBe(removed);
  });

  it('never gives a removed context id to another context, after a restart too', () => {
    const open = () => openRetainingWriter(dir.path, 'ids', NOW);
    const writer = open();
    // four transactions 10 h back: retention removes them, contexts and all
    writer.writeBatch(batchOf(writer, NOW - 10n * HOUR, 4, 1, 1));
    writer.prune(1_000_000);
    writer.close();
    expect(readBack(writer.path).contexts).toBe(0);
    // a daemon that named ids 1-4 by those transactions must never see them name another
    const again = open();
    expect(again.contexts.id('after-restart', null)).toBe(5);
    again.close();
  });

  it('gives a context back to a batch that still refers to it after retention removed it', () => {
    const writer = StoreWriter.open(dir.path, 'n', {
      retention: { retainNs: Number(HOUR), retainContextNs: Number(HOUR), maxStore: { bytes: 0 } },
      now: () => NOW,
    });
    const old = batchOf(writer, NOW - 2n * HOUR, 1, 1, 1);
    const ctx = old.ctx[0]!;
    writer.writeBatch(old);
    const { forgotten, epoch } = writer.prune(1000);
    expect(forgotten).toEqual([[ctx, `t${NOW - 2n * HOUR}-0`, null, null, null]]);

    // Filled before the decoder heard of the removal: refers to the removed id.
    const late = batchOf(writer, NOW, 1, 1, 1);
    late.ctx[0] = ctx;
    writer.writeBatch(late);
    writer.acknowledgeForgotten(epoch);
    writer.close();
    const db = new Database(writer.path, { readonly: true });
    expect(
      db.prepare('SELECT c.transaction_id FROM events e JOIN contexts c ON c.id = e.ctx').pluck().all(),
    ).toEqual([`t${NOW - 2n * HOUR}-0`]);
    db.close();
  });
});
