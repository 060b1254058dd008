import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { EventBatch } from '../../agent/ingest/event-batch';
import { EVENT_COLUMNS, type EventRow } from '../../core/store/event-columns';
import { SCHEMA_VERSION, StoreError } from '../../core/store/schema';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();
const BASE = 1795345678123456789n;

function twoEvents(writer: StoreWriter): EventBatch {
  const batch = new EventBatch(16);
  batch.clear(BASE);
  const common = { service: writer.services.id('api'), comm: writer.comms.id('node'), pid: 10, tid: 11 };
  batch.pushSysWrite({
    ...common,
    tsOffset: 7,
    dur: 1500,
    ctx: writer.contexts.id('t1', 'tr1'),
    bytes: 64,
    fd: 3,
    ret: 64,
    syscall: 1,
  });
  batch.pushBlockIo({
    ...common,
    tsOffset: 0,
    dur: 250_000,
    ctx: 0,
    bytes: 4096,
    dev: 7 * 0x100000 + 2,
    sector: 2048,
    op: 1,
    error: -5,
  });
  return batch;
}

function readRows(path: string): EventRow[] {
  const db = new Database(path, { readonly: true });
  try {
    return db
      .prepare(`SELECT ${EVENT_COLUMNS} FROM events ORDER BY ts, seq`)
      .safeIntegers(true)
      .all() as EventRow[];
  } finally {
    db.close();
  }
}

describe('StoreWriter', () => {
  it('stores exact 19-digit timestamps, per-type columns and dictionary ids', () => {
    const writer = StoreWriter.open(dir.path, 'node-a');
    writer.writeBatch(twoEvents(writer));
    writer.close();
    const [block, write] = readRows(storePath(dir.path, 'node-a'));
    expect(block!.ts).toBe(BASE);
    expect(block!.type).toBe(2n);
    expect(block!.dev).toBe(BigInt(7 * 0x100000 + 2));
    expect(block!.error).toBe(-5n);
    expect(block!.ctx).toBeNull();
    expect(block!.fd).toBeNull();
    expect(write!.ts).toBe(BASE + 7n);
    expect(write!.ret).toBe(64n);
    expect(write!.ctx).not.toBeNull();
    expect(write!.dev).toBeNull();
  });

  it('continues the sequence after a reopen, so event ids never repeat', () => {
    const first = StoreWriter.open(dir.path, 'n');
    first.writeBatch(twoEvents(first));
    first.close();
    const second = StoreWriter.open(dir.path, 'n');
    second.writeBatch(twoEvents(second));
    second.close();
    const seqs = readRows(storePath(dir.path, 'n')).map((r) => Number(r.seq));
    expect(new Set(seqs).size).toBe(4);
    expect(Math.max(...seqs)).toBe(4);
  });

  it('inserts more rows than one multi-row statement holds', () => {
    const writer = StoreWriter.open(dir.path, 'n');
    const batch = new EventBatch(1000);
    batch.clear(BASE);
    for (let i = 0; i < 1000; i++) {
      batch.pushSysWrite({
        tsOffset: i,
        dur: i,
        service: 1,
        ctx: 0,
        pid: 1,
        tid: 1,
        comm: 1,
        bytes: i,
        fd: 1,
        ret: i,
        syscall: 1,
      });
    }
    writer.writeBatch(batch);
    writer.close();
    const rows = readRows(storePath(dir.path, 'n'));
    expect(rows).toHaveLength(1000);
    expect(rows[999]!.ts).toBe(BASE + 999n);
    expect(rows[999]!.bytes).toBe(999n);
  });

  it('refuses a store from a newer schema and leaves it untouched', () => {
    const path = storePath(dir.path, 'n');
    const db = new Database(path);
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => StoreWriter.open(dir.path, 'n')).toThrow(StoreError);
    const check = new Database(path);
    expect(check.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION + 1);
    expect(check.prepare(`SELECT count(*) AS n FROM sqlite_master`).get()).toEqual({ n: 0 });
    check.close();
  });

  it('lets one writer at a time write a store, and takes over the lock of a dead owner', () => {
    const first = StoreWriter.open(dir.path, 'n');
    expect(() => StoreWriter.open(dir.path, 'n')).not.toThrow(); // same process: the lock is ours
    writeFileSync(`${storePath(dir.path, 'n')}.lock`, '1'); // pid 1 is alive and not us
    expect(() => StoreWriter.open(dir.path, 'n')).toThrow(/being written by another kreplay agent \(pid 1\)/);
    writeFileSync(`${storePath(dir.path, 'n')}.lock`, '4000000'); // no such process
    StoreWriter.open(dir.path, 'n').close();
    first.close();
  });

  it('names a data dir it cannot create or write', () => {
    expect(() => StoreWriter.open('/proc/kreplay-nope/x', 'n')).toThrow(/data dir \/proc\/kreplay-nope\/x/);
    const file = `${dir.path}/plain-file`;
    writeFileSync(file, '');
    expect(() => StoreWriter.open(file, 'n')).toThrow(/not a writable directory/);
  });
});
