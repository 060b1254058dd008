/**
 * A target lives as long as its events, on the real agent (agent/store/retention.ts): coreutils'
 * split writes a new file a line, as a server writes a temporary file a request. Each file is a
 * target of its own; once retention took the writes, their files are gone from the store's
 * targets too, and no stored event names a target the store does not hold.
 */
import Database from 'better-sqlite3';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, runInCgroup, type TestCgroup } from '../support/cgroup';
import { waitFor } from '../support/wait';

const FILES = 2000;

// its own directory, removed once the agent stopped writing into it
const dir = { path: mkdtempSync(join(tmpdir(), 'kreplay-target-lifetime-')) };
let cgroup: TestCgroup;
let agent: AgentProcess;

afterAll(async () => {
  await agent?.stop();
  cgroup?.remove();
  rmSync(dir.path, { recursive: true, force: true });
});

function query<T>(store: string, sql: string, ...params: unknown[]): T {
  const db = new Database(store, { readonly: true, fileMustExist: true });
  try {
    return db
      .prepare(sql)
      .pluck()
      .get(...params) as T;
  } finally {
    db.close();
  }
}

describe('targets and retention (real kernel)', () => {
  it("removes each file split wrote from the store's targets with its last write, naming none that is gone", async () => {
    const data = join(dir.path, 'data');
    const store = join(data, 'tl.db');
    cgroup = createCgroup(`kreplay-target-lifetime-${process.pid}`);
    agent = await startAgent([
      ...['--data-dir', data, '--node', 'tl', '--cgroup-id', String(cgroup.id)],
      ...['--retain', '3s', '--retain-context', '3s', '--max-store-bytes', '0'],
    ]);
    const input = join(dir.path, 'lines');
    writeFileSync(input, Array.from({ length: FILES }, (_, i) => `line ${i}\n`).join(''));
    const out = join(dir.path, 'parts');
    mkdirSync(out);
    await runInCgroup(cgroup, 'split', ['-l', '1', '-a', '4', input, join(out, 'part-')]);

    const under = `${out}/part-%`;
    // every part's write stored, each naming its own file
    await waitFor(
      () =>
        query<number>(
          store,
          'SELECT count(DISTINCT t.value) FROM events e JOIN targets t ON t.id = e.target WHERE t.value LIKE ?',
          under,
        ) === FILES,
      { timeoutMs: 30_000, what: `the writes of ${FILES} parts` },
    );
    expect(query<number>(store, 'SELECT count(*) FROM targets WHERE value LIKE ?', under)).toBe(FILES);

    // --retain 3s: the idle writer prunes the writes, and their targets with them
    await waitFor(
      () => query<number>(store, 'SELECT count(*) FROM targets WHERE value LIKE ?', under) === 0,
      {
        timeoutMs: 30_000,
        what: "the parts' targets pruned",
      },
    );
    expect(
      query<number>(
        store,
        'SELECT count(*) FROM events e WHERE e.target IS NOT NULL AND NOT EXISTS (SELECT 1 FROM targets t WHERE t.id = e.target)',
      ),
    ).toBe(0);
    expect(query<number>(store, "SELECT count(*) FROM pruned WHERE reason = 'retain'")).toBeGreaterThan(0);
  }, 120_000);
});
