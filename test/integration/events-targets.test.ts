/**
 * Write targets in the store and the API: target_kind and target on every
 * sys_write (absent on block_io), the target and target_kind filters, each
 * distinct target stored once, and a v1 store migrated in place.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { StoreWriter } from '../../agent/store/store-writer';
import { targetKindCode, type ApiEvent, type TargetKind } from '../../core/model';
import { MIGRATIONS, SCHEMA_VERSION } from '../../core/store/schema';
import type { EventFilter } from '../../daemon/store/event-filter';
import { matchesFilter } from '../support/event-match';
import { writeEvents, writeStore, type TestEvent } from '../support/event-store';
import { get, readEvents, startEventsServer, type EventsServer } from '../support/events-http';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-events-targets-');
const BASE = 1795345678123456789n;
const at = (i: number) => BASE + BigInt(i * 1000);

const TARGETS: [TargetKind, string][] = [
  ['file', '/var/lib/app/wal.log'],
  ['file', '/var/lib/app/data/0001.db'],
  ['file', '/var/lib/apple'],
  ['char', '/dev/null'],
  ['pipe', 'pipe'],
  ['socket', 'tcp 10.0.0.5:5432'],
  ['socket', 'tcp [::1]:8080'],
  ['socket', 'unix /run/app.sock'],
  ['anon', 'anon_inode:[eventfd]'],
  // the same text as another kind's: a path that was a FIFO
  ['pipe', '/var/lib/app/wal.log'],
];

/** Every sys_write names one of TARGETS in turn, one in seven has none (a bad fd); every sixth event is a block request. */
function dataset(): TestEvent[] {
  return Array.from({ length: 140 }, (_, i) => ({
    ts: at(i),
    bytes: i,
    type: i % 6 === 0 ? 'block_io' : 'sys_write',
    target: i % 7 === 0 ? undefined : TARGETS[i % TARGETS.length],
  }));
}

describe('write targets in GET /api/events', () => {
  let server: EventsServer;
  let all: ApiEvent[];

  const list = async (query: string) => {
    const reply = await get(`${server.url}/api/events?int64=string&limit=10000&${query}`);
    expect(reply.status).toBe(200);
    return readEvents(reply.text).events;
  };

  beforeEach(async () => {
    writeStore(dir.path, 'alpha', dataset());
    server = await startEventsServer(dir.path);
    all = await list('');
  });
  afterEach(() => server.close());

  it('gives every sys_write its target_kind and target, null when unknown, and block_io neither', () => {
    const byBytes = new Map(all.map((e) => [e.bytes, e]));
    for (const e of dataset()) {
      const event = byBytes.get(e.bytes!)!;
      if (e.type === 'block_io') {
        expect(event).not.toHaveProperty('target');
        expect(event).not.toHaveProperty('target_kind');
      } else {
        expect(event).toMatchObject({ target_kind: e.target?.[0] ?? null, target: e.target?.[1] ?? null });
      }
    }
    expect(byBytes.get(3)).toMatchObject({ target_kind: 'char', target: '/dev/null' });
    expect(byBytes.get(7)).toMatchObject({ target_kind: null, target: null });
  });

  it.each<[string, EventFilter, number]>([
    ['target=/var/lib/app/wal.log', { target: { value: '/var/lib/app/wal.log', prefix: false } }, 20],
    ['target=/var/lib/app/*', { target: { value: '/var/lib/app/', prefix: true } }, 32],
    ['target=/var/lib/app*', { target: { value: '/var/lib/app', prefix: true } }, 40],
    ['target=tcp%20*', { target: { value: 'tcp ', prefix: true } }, 20],
    ['target=*', { target: { value: '', prefix: true } }, 100],
    ['target=/var/lib/ap', { target: { value: '/var/lib/ap', prefix: false } }, 0],
    ['target_kind=socket', { targetKinds: ['socket'] }, 32],
    ['target_kind=file,char', { targetKinds: ['file', 'char'] }, 40],
    [
      'target_kind=pipe&target=/var/*',
      { targetKinds: ['pipe'], target: { value: '/var/', prefix: true } },
      12,
    ],
    ['target_kind=other', { targetKinds: ['other'] }, 0],
    ['target_kind=file&event_type=block_io', { targetKinds: ['file'], types: ['block_io'] }, 0],
  ])('%s', async (query, filter, count) => {
    const expected = all.filter((e) => matchesFilter(e, filter));
    expect(expected).toHaveLength(count);
    expect(await list(query)).toEqual(expected);
    expect(await list(`${query}&order=desc`)).toEqual([...expected].reverse());
  });

  it('pages through a target filter with its cursor, and refuses that cursor under another target', async () => {
    const first = await get(`${server.url}/api/events?target=/var/lib/app/*&limit=10`);
    const { events, next_cursor } = readEvents(first.text);
    expect(events).toHaveLength(10);
    const rest = await list(`target=/var/lib/app/*&cursor=${next_cursor}`);
    expect([...events, ...rest].map((e) => e.bytes)).toEqual(
      all
        .filter((e) => e.event_type === 'sys_write' && e.target?.startsWith('/var/lib/app/'))
        .map((e) => e.bytes),
    );
    const other = await get(`${server.url}/api/events?target=/var/lib/*&cursor=${next_cursor}`);
    expect(other.status).toBe(400);
    expect(JSON.parse(other.text)).toMatchObject({ errors: [{ param: 'cursor' }] });
  });
});

describe('the targets dictionary', () => {
  it('stores each distinct (kind, target) once a run, across batches; a new run starts rows of its own', () => {
    for (let round = 0; round < 2; round++) {
      const writer = StoreWriter.open(dir.path, 'alpha');
      try {
        writeEvents(
          writer,
          dataset().map((e) => ({ ...e, ts: e.ts + BigInt(round) * 1_000_000n })),
        );
        writeEvents(
          writer,
          dataset().map((e) => ({ ...e, ts: e.ts + BigInt(round) * 1_000_000n + 500n })),
        );
      } finally {
        writer.close();
      }
    }
    const db = new Database(join(dir.path, 'alpha.db'), { readonly: true });
    try {
      // the agent loads no targets when it starts (a host may have written millions of files)
      const rows = db.prepare('SELECT kind, value FROM targets ORDER BY id').raw().all() as [
        number,
        string,
      ][];
      expect(rows).toHaveLength(2 * TARGETS.length);
      const run = rows.slice(0, TARGETS.length);
      expect(rows.slice(TARGETS.length)).toEqual(run);
      expect(run.map(([kind, value]) => `${kind} ${value}`).sort()).toEqual(
        TARGETS.map(([kind, value]) => `${targetKindCode(kind)} ${value}`).sort(),
      );
      const referenced = db.prepare('SELECT count(DISTINCT target) FROM events').pluck().get();
      expect(referenced).toBe(2 * TARGETS.length);
    } finally {
      db.close();
    }
  });
});

describe('a v1 store', () => {
  /** A store as kreplay wrote it before targets existed, with one sys_write and one block_io. */
  function writeV1Store(path: string): void {
    const db = new Database(path);
    db.exec(MIGRATIONS[0]!);
    db.exec(`
      INSERT INTO meta VALUES ('store_id', 'a1b2c3d4e5f6'), ('node', 'old'), ('next_seq', '3');
      INSERT INTO services VALUES (1, 'svc');
      INSERT INTO comms VALUES (1, 'worker');
      INSERT INTO events (ts, seq, type, dur, service, pid, tid, comm, bytes, fd, ret, syscall)
        VALUES (${at(0)}, 1, 1, 1000, 1, 7, 7, 1, 5, 3, 5, 1);
      INSERT INTO events (ts, seq, type, dur, service, pid, tid, comm, bytes, dev, sector, op, error)
        VALUES (${at(1)}, 2, 2, 1000, 1, 7, 7, 1, 4096, 8388608, 0, 1, 0);
    `);
    db.pragma('user_version = 1');
    db.close();
  }

  it('is read as it is, then migrated in place by the agent while the daemon reads it', async () => {
    writeV1Store(join(dir.path, 'old.db'));
    const server = await startEventsServer(dir.path);
    const list = async (query = '') =>
      readEvents((await get(`${server.url}/api/events?int64=string&${query}`)).text).events.map((e) => [
        e.bytes,
        e.event_type,
        'target' in e ? e.target : 'absent',
      ]);
    try {
      expect(await list()).toEqual([
        [5, 'sys_write', null],
        [4096, 'block_io', 'absent'],
      ]);
      expect(await list('target=*')).toEqual([]);

      const writer = StoreWriter.open(dir.path, 'old');
      try {
        expect(writer.db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
        writeEvents(writer, [{ ts: at(2), bytes: 6, target: ['file', '/srv/new.log'] }]);
      } finally {
        writer.close();
      }
      expect(await list()).toEqual([
        [5, 'sys_write', null],
        [4096, 'block_io', 'absent'],
        [6, 'sys_write', '/srv/new.log'],
      ]);
      expect(await list('target=/srv/*')).toEqual([[6, 'sys_write', '/srv/new.log']]);
      const first = readEvents((await get(`${server.url}/api/events?limit=1`)).text).events[0]!;
      expect(first.event_id.startsWith('a1b2c3d4e5f6')).toBe(true);
    } finally {
      await server.close();
    }
  });
});
