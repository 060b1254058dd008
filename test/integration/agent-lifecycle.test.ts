/** The agent binary's life: drain on SIGTERM, survive SIGKILL, refuse what it must not touch. */
import Database from 'better-sqlite3';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SCHEMA_VERSION } from '../../core/store/schema';
import { KREPLAY_BIN, startAgent } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { countStored, readStoredEvents } from '../support/store-rows';
import { waitFor } from '../support/wait';

let dir: string;
let cgroup: TestCgroup;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-life-'));
  cgroup = createCgroup(`kreplay-life-${process.pid}`);
});

afterAll(() => {
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

function stormInCgroup(writes: number) {
  return spawn(
    '/bin/sh',
    ['-c', `${cgroup.enter} dd if=/dev/zero of=/dev/null bs=64 count=${writes} status=none`],
    {
      stdio: 'ignore',
    },
  );
}

describe('agent lifecycle (real kernel)', () => {
  it('leaves a sound store after SIGKILL mid-ingest, and the next run appends and drains on SIGTERM', async () => {
    const data = join(dir, 'kill');
    const store = join(data, 'life.db');
    const args = [
      '--data-dir',
      data,
      '--node',
      'life',
      '--cgroup-id',
      String(cgroup.id),
      '--filter-transactions',
      '--quiet',
    ];
    const first = await startAgent(args);
    const storm = stormInCgroup(50_000_000);
    await waitFor(() => (countStored(store) > 10_000 ? true : undefined), 30000);
    expect(await first.stop('SIGKILL')).toBeNull();
    storm.kill('SIGKILL');

    const check = new Database(store, { readonly: true });
    expect(check.pragma('integrity_check', { simple: true })).toBe('ok');
    check.close();
    const afterKill = countStored(store);

    const second = await startAgent(args);
    const dd = spawnSync('/bin/sh', [
      '-c',
      `${cgroup.enter} dd if=/dev/zero of=/dev/null bs=64 count=1000 status=none`,
    ]);
    expect(dd.status).toBe(0);
    await waitFor(() => (countStored(store) >= afterKill + 1000 ? true : undefined));
    expect(await second.stop('SIGTERM')).toBe(0);

    const db = new Database(store, { readonly: true });
    const runs = db.prepare('SELECT stopped_ns, exit_reason, attach_points FROM runs ORDER BY id').all() as {
      stopped_ns: number | null;
      exit_reason: string | null;
      attach_points: string;
    }[];
    expect(runs).toHaveLength(2);
    expect(runs[0]!.stopped_ns).toBeNull();
    expect(runs[1]!.exit_reason).toBe('signal SIGTERM');
    expect(JSON.parse(runs[1]!.attach_points)).toEqual(
      expect.arrayContaining([expect.stringMatching(/sys_enter_write/)]),
    );
    const counters = db.prepare(`SELECT name FROM counters WHERE run_id = 2`).all() as { name: string }[];
    expect(counters.map((c) => c.name)).toEqual(
      expect.arrayContaining(['sys_write_dropped', 'block_io_dropped', 'rows_written']),
    );
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    db.close();
  });

  it('opens a fresh store when the file is deleted under it, and records the boundary', async () => {
    const data = join(dir, 'rm');
    const store = join(data, 'rm.db');
    const args = [
      '--data-dir',
      data,
      '--node',
      'rm',
      '--cgroup-id',
      String(cgroup.id),
      '--filter-transactions',
      '--quiet',
    ];
    const agent = await startAgent(args);
    const writes = (n: number) =>
      spawnSync('/bin/sh', [
        '-c',
        `${cgroup.enter} dd if=/dev/zero of=/dev/null bs=64 count=${n} status=none`,
      ]);
    writes(100);
    await waitFor(() => (countStored(store) >= 100 ? true : undefined));
    for (const suffix of ['', '-wal', '-shm']) rmSync(store + suffix, { force: true });
    writes(200);
    // the fresh file exists a moment before its tables do
    const storedNow = () => {
      try {
        return countStored(store);
      } catch {
        return 0;
      }
    };
    await waitFor(() => (existsSync(store) && storedNow() >= 200 ? true : undefined));
    expect(await agent.stop()).toBe(0);
    expect(agent.output()).toMatch(/the store file was deleted or replaced \(.*rm\.db\) while the agent ran/);

    const db = new Database(store, { readonly: true });
    // writes only: dd's exec may read its pages from disk in the cgroup (block requests)
    expect(db.prepare('SELECT count(*) AS n FROM events WHERE type = 1').get()).toEqual({ n: 200 });
    expect(db.prepare('SELECT start_reason, exit_reason FROM runs').all()).toEqual([
      { start_reason: 'the store file was deleted or replaced', exit_reason: 'signal SIGTERM' },
    ]);
    const replaced = db
      .prepare(`SELECT max(value) AS v FROM counters WHERE name = 'store_replacements'`)
      .get() as { v: number };
    expect(replaced.v).toBe(1);
    db.close();
  });

  it('names a damaged store and what to do, or moves it aside with --on-corrupt rename', async () => {
    const data = join(dir, 'corrupt');
    spawnSync('mkdir', ['-p', data]);
    const path = join(data, 'c.db');
    writeFileSync(path, Buffer.alloc(8192, 0x5a));
    const run = (extra: string[]) =>
      spawnSync(process.execPath, [KREPLAY_BIN, 'agent', '--data-dir', data, '--node', 'c', ...extra], {
        encoding: 'utf8',
        timeout: 60000,
      });
    const refused = run([]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain(`kreplay: ${path} is damaged`);
    expect(refused.stderr).toContain('--on-corrupt rename');
    expect(refused.stderr).not.toMatch(/^\s+at /m);

    // nothing to capture (a cgroup of its own, which no process ever enters): the fresh store must start empty
    const empty = createCgroup(`kreplay-life-empty-${process.pid}`);
    const renamed = await startAgent([
      '--data-dir',
      data,
      '--node',
      'c',
      '--on-corrupt',
      'rename',
      '--cgroup-id',
      String(empty.id),
      // without it another process's transaction writes (a traced test's, on a shared machine) are kept
      '--filter-transactions',
      '--quiet',
    ]);
    expect(await renamed.stop()).toBe(0);
    empty.remove();
    const aside = readdirSync(data).filter((f) => /^c\.db\.corrupt-[0-9T-]+Z$/.test(f));
    expect(aside).toHaveLength(1);
    expect(renamed.output()).toContain(`moved it to ${join(data, aside[0]!)}`);
    expect(readFileSync(join(data, aside[0]!)).equals(Buffer.alloc(8192, 0x5a))).toBe(true);
    expect(countStored(path)).toBe(0);
  });

  it('stores writes without targets under --no-targets', async () => {
    const data = join(dir, 'no-targets');
    const store = join(data, 'nt.db');
    const agent = await startAgent([
      '--data-dir',
      data,
      '--node',
      'nt',
      '--cgroup-id',
      String(cgroup.id),
      '--filter-transactions',
      '--quiet',
      '--no-targets',
    ]);
    try {
      spawnSync('/bin/sh', ['-c', `${cgroup.enter} sh -c 'printf 12345 > /dev/null'`]);
      const rows = await waitFor(() => {
        const found = readStoredEvents(store, 'e.bytes = 5');
        return found.length > 0 ? found : undefined;
      });
      expect(rows.map((r) => [r.target_kind, r.target])).toEqual([[null, null]]);
    } finally {
      expect(await agent.stop()).toBe(0);
    }
  });

  it('refuses a store from a newer schema without touching it', () => {
    const data = join(dir, 'newer');
    spawnSync('mkdir', ['-p', data]);
    const path = join(data, 'n.db');
    const db = new Database(path);
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    const before = readFileSync(path);
    const out = spawnSync(process.execPath, [KREPLAY_BIN, 'agent', '--data-dir', data, '--node', 'n'], {
      encoding: 'utf8',
    });
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(/schema version \d+, newer than this kreplay understands/);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it("the tests' agent that never says it captures is killed, not left running to keep jest from exiting", async () => {
    const data = join(dir, 'never-ready');
    await expect(startAgent(['--data-dir', data, '--cgroup-id', String(cgroup.id)], 1)).rejects.toThrow(
      /agent not capturing after 1 ms/,
    );
    const running = () =>
      readdirSync('/proc')
        .filter((pid) => /^\d+$/.test(pid))
        .filter((pid) => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(data);
          } catch {
            return false; // gone while read
          }
        });
    await waitFor(() => running().length === 0, {
      what: () => `no agent on ${data} (running: ${running().join(' ')})`,
    });
  });

  it('names a data dir it cannot write', () => {
    const out = spawnSync(
      process.execPath,
      [KREPLAY_BIN, 'agent', '--data-dir', '/proc/version/x', '--node', 'n'],
      {
        encoding: 'utf8',
      },
    );
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(/data dir \/proc\/version\/x is not a writable directory/);
  });
});
