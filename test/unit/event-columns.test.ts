import Database from 'better-sqlite3';
import { EventBatch } from '../../agent/ingest/event-batch';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import { RecordType } from '../../core/model';
import { EVENT_COLUMN_TABLE, EVENT_COLUMNS, type EventRow } from '../../core/store/event-columns';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();

describe('the events column table', () => {
  it('is exactly the columns of a freshly migrated store, in order, with their nullability', () => {
    StoreWriter.open(dir.path, 'n').close();
    const db = new Database(storePath(dir.path, 'n'), { readonly: true });
    try {
      const info = db.prepare('PRAGMA table_info(events)').all() as {
        name: string;
        type: string;
        notnull: number;
        pk: number;
      }[];
      expect(info.map((c) => ({ name: c.name, type: c.type, nullable: c.notnull === 0 }))).toEqual(
        EVENT_COLUMN_TABLE.map((c) => ({ name: c.name, type: 'INTEGER', nullable: c.nullable })),
      );
      expect(info.filter((c) => c.pk > 0).map((c) => c.name)).toEqual(['ts', 'seq']);
    } finally {
      db.close();
    }
  });

  it('drives the INSERT: each type fills its own columns and leaves the others NULL', () => {
    const writer = StoreWriter.open(dir.path, 'm');
    const batch = new EventBatch(4);
    batch.clear(1_000n);
    const common = {
      service: writer.services.id('s'),
      container: writer.containers.id('{"id":"c"}'),
      comm: writer.comms.id('c'),
      pid: 10,
      tid: 11,
    };
    const target = writer.targets.id(1, '/tmp/x');
    const ctx = writer.contexts.id('t', null);
    batch.pushSysWrite({
      ...common,
      ctx,
      tsOffset: 1,
      dur: 2,
      bytes: 3,
      fd: 4,
      ret: 5,
      syscall: 6,
      target,
      request: 77,
    });
    batch.pushBlockIo({
      ...common,
      ctx,
      tsOffset: 2,
      dur: 7,
      bytes: 8,
      dev: 9,
      sector: 10,
      op: 1,
      error: -11,
    });
    writer.writeBatch(batch);
    writer.close();
    const db = new Database(storePath(dir.path, 'm'), { readonly: true });
    try {
      const rows = db
        .prepare(`SELECT ${EVENT_COLUMNS} FROM events ORDER BY ts`)
        .safeIntegers(true)
        .all() as EventRow[];
      expect(rows.map((r) => [r.fd, r.ret, r.syscall, r.target, r.dev, r.sector, r.op, r.error])).toEqual([
        [4n, 5n, 6n, BigInt(target), null, null, null, null],
        [null, null, null, null, 9n, 10n, 1n, -11n],
      ]);
      expect(rows.map((r) => Number(r.type))).toEqual([RecordType.SysWrite, RecordType.BlockIo]);
      for (const row of rows) {
        const filled = EVENT_COLUMN_TABLE.filter((c) => row[c.name] !== null).map((c) => c.name);
        const own = EVENT_COLUMN_TABLE.filter(
          (c) => c.of === 'all' || (c.of as readonly number[]).includes(Number(row.type)),
        ).map((c) => c.name);
        expect(filled).toEqual(own);
      }
    } finally {
      db.close();
    }
  });
});
