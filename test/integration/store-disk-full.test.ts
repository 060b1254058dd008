/**
 * The agent on a filesystem that runs full (a real 8 MiB tmpfs): it keeps
 * capturing, counts what it could not store (disk_full), says so once,
 * stores again once space is freed, keeps the file sound, and drains and stops
 * within its deadline on SIGTERM however full the disk is.
 */
import Database from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { mountSmallFs, type SmallFs } from '../support/small-fs';
import { countStored } from '../support/store-rows';
import { waitFor } from '../support/wait';

let fs: SmallFs;
let cgroup: TestCgroup;
const agents: AgentProcess[] = [];

beforeAll(() => {
  fs = mountSmallFs(8);
  cgroup = createCgroup(`kreplay-full-${process.pid}`);
});

afterAll(async () => {
  for (const agent of agents) await agent.stop('SIGKILL');
  cgroup?.remove();
  fs?.remove();
});

/** `writes` writes of 64 bytes to /dev/null from the test cgroup, and nothing else from it. */
function writeInCgroup(writes: number): void {
  const out = spawnSync('/bin/sh', [
    '-c',
    `${cgroup.enter} dd if=/dev/zero of=/dev/null bs=64 count=${writes} status=none`,
  ]);
  expect(out.status).toBe(0);
}

/**
 * SIGTERM, and whether the store was drained and closed within the agent's own drain deadline
 * (past it the agent exits 1 without its tail); the probes' detaching after that is the kernel's.
 */
async function stopDrained(agent: AgentProcess): Promise<{ code: number | null; closed: boolean }> {
  const code = await agent.stop('SIGTERM');
  return { code, closed: /\bstopped reason="signal SIGTERM".* closedMs=\d+/.test(agent.output()) };
}

function runCounters(store: string, runId: number): Record<string, number> {
  const db = new Database(store, { readonly: true });
  try {
    const rows = db
      .prepare('SELECT name, max(value) AS value FROM counters WHERE run_id = ? GROUP BY name')
      .all(runId) as { name: string; value: number }[];
    return Object.fromEntries(rows.map((r) => [r.name, r.value]));
  } finally {
    db.close();
  }
}

const occurrences = (text: string, needle: string) => text.split(needle).length - 1;

describe('agent on a full disk (real tmpfs, real kernel)', () => {
  it('counts drops as disk_full, stops fast while full, resumes when space returns, file stays sound', async () => {
    const store = join(fs.path, 'full.db');
    // No size cap: the default (10% of this filesystem) would keep the store from filling it.
    // --filter-transactions: other processes' transaction writes would be kept and counted too.
    const args = [
      ...['--data-dir', fs.path, '--node', 'full', '--cgroup-id', String(cgroup.id), '--filter-transactions'],
      ...['--max-store-bytes', '0'],
    ];

    // Run 1: the disk fills under a burst; SIGTERM while it is full.
    const filler = fs.fill(1024 * 1024);
    const first = await startAgent(args);
    agents.push(first);
    writeInCgroup(300_000);
    await waitFor(() => (/disk_full=[1-9]/.test(first.output()) ? true : undefined), 30000);
    // said once per episode: again only after space came back in between
    const fullNotices = occurrences(first.output(), 'disk full: no space left');
    expect(fullNotices).toBeGreaterThanOrEqual(1);
    expect(fullNotices).toBe(occurrences(first.output(), 'space is back') + 1);
    expect(await stopDrained(first)).toEqual({ code: 0, closed: true });
    expect(first.output()).not.toMatch(/StoreThreadError|at .*\.js:\d+/);

    // Run 2 starts on the still-full disk, drops, then stores again once the filler is gone.
    const storedBefore = countStored(store);
    const second = await startAgent(args);
    agents.push(second);
    writeInCgroup(50_000);
    await waitFor(() => (/disk_full=[1-9]/.test(second.output()) ? true : undefined), 30000);
    rmSync(filler);
    writeInCgroup(2_000);
    await waitFor(() => (second.output().includes('space is back') ? true : undefined), 30000);
    await waitFor(() => (countStored(store) > storedBefore ? true : undefined), 30000);
    expect(await stopDrained(second)).toEqual({ code: 0, closed: true });

    const db = new Database(store, { readonly: true });
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    const runs = db.prepare('SELECT id, exit_reason FROM runs ORDER BY id').all() as {
      id: number;
      exit_reason: string | null;
    }[];
    db.close();
    expect(runs.map((r) => r.exit_reason)).toEqual(['signal SIGTERM', 'signal SIGTERM']);

    // Every write of run 2 is either stored or counted, by reason. Block requests of the cgroup
    // count too: when dd's pages are not cached (memory pressure in a full test run), its exec
    // reads them from disk in the cgroup (this once made 52,001 stored + dropped).
    const counters = runCounters(store, runs[1]!.id);
    expect(counters.disk_full_dropped).toBeGreaterThan(0);
    const storedRun2 = countStored(store) - storedBefore;
    expect(storedRun2).toBe(counters.rows_written);
    expect((counters.sys_write_emitted ?? 0) + (counters.sys_write_dropped ?? 0)).toBe(52_000);
    expect(storedRun2 + counters.disk_full_dropped!).toBe(
      (counters.sys_write_emitted ?? 0) + (counters.block_io_emitted ?? 0),
    );
  });
});
