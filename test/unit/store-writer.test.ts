import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { EventBatch } from '../../agent/ingest/event-batch';
import { EVENT_COLUMNS, type EventRow } from '../../core/store/event-columns';
import { SCHEMA_VERSION, StoreError } from '../../core/store/schema';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import { flockHolder } from '../../agent/store/writer-lock';
import { useTempDir } from '../support/temp-dir';

const ADDON = resolve(__dirname, '..', '..', 'native', 'build', 'Release', 'kreplay_native.node');

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

  it('lets one writer at a time write a store: shared in this process, refused to another, a pid file ignored', async () => {
    const first = StoreWriter.open(dir.path, 'n');
    StoreWriter.open(dir.path, 'n').close(); // same process: the lock is ours
    writeFileSync(`${storePath(dir.path, 'n')}.lock`, '1'); // a pid file of old naming a live pid blocks nothing
    StoreWriter.open(dir.path, 'n').close();
    first.close();
    // another process takes the store's lock (as a second agent would) and keeps it
    const take = `require(${JSON.stringify(ADDON)}).lockFileExclusive(${JSON.stringify(storePath(dir.path, 'n'))});`;
    const holder = spawn(
      process.execPath,
      ['-e', `${take} console.log('held'); setInterval(() => {}, 1000);`],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    try {
      await once(holder.stdout!, 'data');
      expect(() => StoreWriter.open(dir.path, 'n')).toThrow(
        `being written by another kreplay agent (pid ${holder.pid})`,
      );
    } finally {
      holder.kill('SIGKILL');
      await once(holder, 'exit');
    }
    // the kernel dropped the lock with its holder
    StoreWriter.open(dir.path, 'n').close();
  });

  it('names a data dir it cannot create or write', () => {
    expect(() => StoreWriter.open('/proc/kreplay-nope/x', 'n')).toThrow(/data dir \/proc\/kreplay-nope\/x/);
    const file = `${dir.path}/plain-file`;
    writeFileSync(file, '');
    expect(() => StoreWriter.open(file, 'n')).toThrow(/not a writable directory/);
  });
});

describe('flockHolder', () => {
  it("reads the holder's pid of a device and inode from /proc/locks", () => {
    const locks = [
      '1: POSIX  ADVISORY  WRITE 77 fe:00:2146401 0 EOF',
      '2: FLOCK  ADVISORY  WRITE 4242 fe:00:2146400 0 EOF',
      '3: FLOCK  ADVISORY  WRITE 99 08:12:2146400 0 EOF',
    ].join('\n');
    expect(flockHolder(0xfe00, 2146400, locks)).toBe(4242);
    expect(flockHolder(0x0812, 2146400, locks)).toBe(99);
    expect(flockHolder(0xfe00, 2146401, locks)).toBeNull(); // a POSIX lock (SQLite's) is not the writer's
  });
});
