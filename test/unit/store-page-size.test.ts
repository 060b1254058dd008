/**
 * A store's page size (core/store/schema.ts NEW_STORE_PAGE_BYTES): a new store is made with it, but
 * under a small --max-store-bytes with SQLite's 4 KiB; and a store made before, at 4 KiB, keeps its
 * own (no VACUUM converts it) while the agent writes it and the daemon reads it.
 */
import Database from 'better-sqlite3';
import { openSync, readSync, closeSync } from 'node:fs';
import { EventBatch } from '../../agent/ingest/event-batch';
import { StoreWriter, storePath } from '../../agent/store/store-writer';
import { silentLogger } from '../../core/log/logger';
import { NEW_STORE_PAGE_BYTES, SMALL_CAP_BYTES } from '../../core/store/schema';
import { NodeStores } from '../../daemon/store/node-stores';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-store-page-size-');
const REQUESTS = 2000;

/** The page size the file's header gives (bytes 16-17, big-endian; 1 means 65,536). */
function headerPageSize(path: string): number {
  const header = Buffer.alloc(18);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, header, 0, 18, 0);
  } finally {
    closeSync(fd);
  }
  const size = header.readUInt16BE(16);
  return size === 1 ? 65536 : size;
}

/** `REQUESTS` requests of two events each, every request its own transaction `${tag}-${r}`. */
function writeRequests(writer: StoreWriter, tag: string, baseNs: bigint): void {
  const batch = new EventBatch(2 * REQUESTS);
  batch.clear(baseNs);
  const service = writer.services.id('api');
  const comm = writer.comms.id('server');
  for (let r = 0; r < REQUESTS; r++) {
    const ctx = writer.contexts.id(`${tag}-${r}`, null);
    const common = { service, comm, ctx, pid: 10, tid: 11, dur: 2000, fd: 7, syscall: 1 };
    batch.pushSysWrite({ ...common, tsOffset: r * 1000, bytes: 40, ret: 40 });
    batch.pushSysWrite({ ...common, tsOffset: r * 1000 + 500, bytes: 120 + (r % 50), ret: 120 + (r % 50) });
  }
  writer.writeBatch(batch);
}

/** Each sampled request of `tag` reads back as exactly its two events, through the daemon's reads. */
function expectRequests(tag: string): void {
  const stores = new NodeStores(dir.path, silentLogger);
  for (const r of [0, 1, 777, REQUESTS - 1]) {
    const { events } = stores.page({ transactionId: `${tag}-${r}` }, { limit: 10, order: 'asc' });
    expect(events.map((e) => [e.transaction_id, e.bytes])).toEqual([
      [`${tag}-${r}`, 40],
      [`${tag}-${r}`, 120 + (r % 50)],
    ]);
  }
  expect(stores.summarize({}).count).toBeGreaterThanOrEqual(2 * REQUESTS);
}

describe("a store's page size", () => {
  it('is NEW_STORE_PAGE_BYTES in a new store, through writes, a close and a reopen', () => {
    expect(NEW_STORE_PAGE_BYTES).toBe(16384);
    const writer = StoreWriter.open(dir.path, 'n');
    const path = writer.path;
    expect(writer.db.pragma('page_size', { simple: true })).toBe(NEW_STORE_PAGE_BYTES);
    expect(writer.db.pragma('journal_mode', { simple: true })).toBe('wal');
    writeRequests(writer, 'a', 1_795_000_000_000_000_000n);
    writer.close();
    expect(headerPageSize(path)).toBe(NEW_STORE_PAGE_BYTES);

    const again = StoreWriter.open(dir.path, 'n');
    writeRequests(again, 'b', 1_795_000_001_000_000_000n);
    expect(again.db.pragma('page_size', { simple: true })).toBe(NEW_STORE_PAGE_BYTES);
    again.close();
    expect(headerPageSize(path)).toBe(NEW_STORE_PAGE_BYTES);
    expectRequests('a');
    expectRequests('b');
  });

  it.each([
    ['a cap under SMALL_CAP_BYTES', 4096, SMALL_CAP_BYTES - 1],
    ['a cap of SMALL_CAP_BYTES', NEW_STORE_PAGE_BYTES, SMALL_CAP_BYTES],
    ["a share of the data dir's filesystem", NEW_STORE_PAGE_BYTES, undefined],
  ])('under %s, a new store gets %d-byte pages', (_what, expected, bytes) => {
    const writer = StoreWriter.open(dir.path, 'n', {
      retention: {
        retainNs: 0,
        retainContextNs: 0,
        maxStore: bytes === undefined ? { share: 0.5 } : { bytes },
      },
    });
    expect(writer.db.pragma('page_size', { simple: true })).toBe(expected);
    writeRequests(writer, 'capped', 1_795_000_000_000_000_000n);
    writer.close();
    expect(headerPageSize(storePath(dir.path, 'n'))).toBe(expected);
    expectRequests('capped');
  });

  it('stays 4 KiB in a store made at 4 KiB, which the writer and the daemon go on using', () => {
    const first = StoreWriter.open(dir.path, 'n');
    writeRequests(first, 'old', 1_795_000_000_000_000_000n);
    first.close();
    // A store as kreplay made it before: the same rows in 4 KiB pages, left in rollback mode as a
    // stopped agent leaves it (StoreWriter.close).
    const path = storePath(dir.path, 'n');
    const raw = new Database(path);
    raw.pragma('page_size = 4096');
    raw.exec('VACUUM');
    raw.close();
    expect(headerPageSize(path)).toBe(4096);

    const writer = StoreWriter.open(dir.path, 'n');
    expect(writer.db.pragma('page_size', { simple: true })).toBe(4096);
    expect(writer.db.pragma('journal_mode', { simple: true })).toBe('wal');
    writeRequests(writer, 'new', 1_795_000_001_000_000_000n);
    writer.close();
    expect(headerPageSize(path)).toBe(4096);
    expectRequests('old');
    expectRequests('new');
    const check = new Database(path, { readonly: true });
    try {
      expect(check.pragma('integrity_check', { simple: true })).toBe('ok');
    } finally {
      check.close();
    }
  });
});
