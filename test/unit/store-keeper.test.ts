import Database from 'better-sqlite3';
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EventBatch } from '../../agent/ingest/event-batch';
import {
  ContextDictionary,
  NameDictionary,
  TargetDictionary,
  takeNewNames,
  type Dictionaries,
} from '../../agent/ingest/dictionary';
import { StoreKeeper, type NoticeLevel, type OnCorrupt } from '../../agent/store/store-keeper';
import { storePath } from '../../agent/store/store-writer';
import { StoreError } from '../../core/store/schema';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();
const BASE = 1795345678123456789n;
const RUN = {
  node: 'k',
  startedNs: BASE,
  kernel: 'test',
  agentVersion: '0',
  attachPoints: [],
  clockOffsetNs: 0n,
  clockErrorNs: 0,
};

function open(onCorrupt: OnCorrupt = 'refuse') {
  const notices: [NoticeLevel, string][] = [];
  const keeper = StoreKeeper.open({
    dataDir: dir.path,
    node: 'k',
    onCorrupt,
    notify: (level, text) => notices.push([level, text]),
  });
  const names = keeper.names();
  const dictionaries: Dictionaries = {
    services: new NameDictionary(names.services),
    comms: new NameDictionary(names.comms),
    contexts: new ContextDictionary([], names.firstFreeContextId),
    targets: new TargetDictionary(names.firstFreeTargetId),
    containers: new NameDictionary(names.containers),
  };
  return { keeper, notices, dictionaries };
}

/** One sys_write per service name, through the decoder's dictionaries as the agent does it. */
function writeEvents(keeper: StoreKeeper, d: Dictionaries, services: string[]): void {
  const batch = new EventBatch(16);
  batch.clear(BASE);
  services.forEach((name, i) =>
    batch.pushSysWrite({
      tsOffset: i,
      dur: 1,
      service: d.services.id(name),
      ctx: d.contexts.id(`txn-${name}`, null),
      pid: 1,
      tid: 1,
      comm: d.comms.id('w'),
      bytes: 1,
      fd: 1,
      ret: 1,
      syscall: 1,
    }),
  );
  keeper.writeBatch(batch, takeNewNames(d, batch.baseTs));
}

function read(path: string) {
  const db = new Database(path, { readonly: true });
  try {
    return {
      services: db
        .prepare(
          `SELECT s.name, c.transaction_id AS txn FROM events e JOIN services s ON s.id = e.service
           JOIN contexts c ON c.id = e.ctx ORDER BY e.ts`,
        )
        .all() as { name: string; txn: string }[],
      runs: db.prepare('SELECT start_reason, exit_reason FROM runs ORDER BY id').all() as {
        start_reason: string;
        exit_reason: string | null;
      }[],
    };
  } finally {
    db.close();
  }
}

describe('StoreKeeper', () => {
  it('opens a fresh store when the file is deleted, with every name and the run boundary', () => {
    const { keeper, notices, dictionaries } = open();
    keeper.beginRun(RUN);
    writeEvents(keeper, dictionaries, ['api']);
    const path = storePath(dir.path, 'k');
    for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });

    // 'api' was defined in the deleted file only; the fresh store must still resolve it.
    writeEvents(keeper, dictionaries, ['api', 'db']);
    keeper.close();

    expect(keeper.replacements).toBe(1);
    expect(read(path)).toEqual({
      services: [
        { name: 'api', txn: 'txn-api' },
        { name: 'db', txn: 'txn-db' },
      ],
      runs: [{ start_reason: 'the store file was deleted or replaced', exit_reason: null }],
    });
    expect(notices.filter(([level]) => level === 'warn')).toHaveLength(1);
    expect(notices[0]![1]).toMatch(/deleted or replaced .*fresh store at the same path/);
  });

  it('keeps a file someone else put at its path, under another name', () => {
    const { keeper, dictionaries } = open();
    keeper.beginRun(RUN);
    writeEvents(keeper, dictionaries, ['api']);
    const path = storePath(dir.path, 'k');
    for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
    writeFileSync(path, 'not ours');
    writeEvents(keeper, dictionaries, ['db']);
    keeper.close();
    const aside = readdirSync(dir.path).filter((f) => f.startsWith('k.db.replaced-') && !f.includes('-wal'));
    expect(aside).toHaveLength(1);
    expect(read(path).services.map((s) => s.name)).toEqual(['db']);
  });

  it('refuses a damaged store by name and says what to do', () => {
    const path = storePath(dir.path, 'k');
    writeFileSync(path, Buffer.alloc(8192, 0x5a));
    let error: unknown;
    try {
      open('refuse');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).code).toBe('E_STORE_CORRUPT');
    expect((error as Error).message).toContain(path);
    expect((error as Error).message).toContain('--on-corrupt rename');
    expect(readdirSync(dir.path).sort()).toEqual(['k.db']);
  });

  it('moves a damaged store aside with --on-corrupt rename and starts fresh', () => {
    const path = storePath(dir.path, 'k');
    writeFileSync(path, Buffer.alloc(8192, 0x5a));
    const { keeper, notices, dictionaries } = open('rename');
    keeper.beginRun(RUN);
    writeEvents(keeper, dictionaries, ['api']);
    keeper.close();
    const aside = readdirSync(dir.path).filter((f) => f.startsWith('k.db.corrupt-'));
    expect(aside).toHaveLength(1);
    expect(existsSync(join(dir.path, aside[0]!))).toBe(true);
    expect(notices[0]![1]).toContain(`moved it to ${join(dir.path, aside[0]!)}`);
    expect(read(path).services).toEqual([{ name: 'api', txn: 'txn-api' }]);
  });
});
