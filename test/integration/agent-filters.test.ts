/**
 * What the real `kreplay agent` captures under --include/--exclude (flags and
 * the config's capture: section) and --sample-background: exact stored rows
 * from the test's own processes and cgroups, the rate recorded per run and
 * told by GET /api/events.
 */
import Database from 'better-sqlite3';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CGROUP_RESCAN_MS } from '../../agent/filter/capture-filter';
import { blockOpName, RecordType } from '../../core/model';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { get, startEventsServer } from '../support/events-http';
import { createLoopDevice } from '../support/loop-device';
import { readStoredEvents, storedCounter } from '../support/store-rows';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const dir = useTempDir('kreplay-agent-filters-');
const tag = process.pid;
const agents: AgentProcess[] = [];
const cgroups: TestCgroup[] = [];

afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop('SIGKILL');
  for (const cgroup of cgroups.splice(0).reverse()) cgroup.remove();
});

function cgroup(name: string): TestCgroup {
  const created = createCgroup(`kreplay-filters-${tag}/${name}`);
  cgroups.push(created);
  return created;
}

/** A program under another name (its comm once exec'd). */
function named(comm: string, program = '/bin/sh'): string {
  const path = join(dir.path, comm);
  if (!existsSync(path)) symlinkSync(program, path);
  return path;
}

/** Runs `script` in a shell called `comm`, inside `group` when given (that write comes before it is in). */
function run(comm: string, script: string, group?: TestCgroup): number {
  const body = group ? `echo $$ > ${group.path}/cgroup.procs; ${script}` : script;
  const out = spawnSync(named(comm), ['-c', body], { stdio: ['ignore', 'ignore', 'inherit'] });
  expect(out.status).toBe(0);
  return out.pid;
}

const counts = (store: string, comm: string, pid: number) =>
  readStoredEvents(store, 'e.type = 1')
    .filter((e) => e.comm === comm && e.pid === pid)
    .map((e) => [e.bytes, e.service, e.txn]);

describe('kreplay agent --include/--exclude (real kernel)', () => {
  it('stores what a service, comm or cgroup path includes, not what is excluded, and keeps transactions', async () => {
    const service = `kr-svc-${tag}`;
    const inService = cgroup(`${service}.service`);
    const excludedGroup = cgroup('excluded');
    const config = join(dir.path, 'agent.yaml');
    writeFileSync(
      config,
      [
        'capture:',
        `  include: ["service:${service}", "comm:kr-inc-${tag % 1000}"]`,
        `  exclude: ["comm:kr-ex-${tag % 1000}"]`,
      ].join('\n'),
    );
    const store = join(dir.path, 'n.db');
    const late = `kr-late-${tag}`;
    const agent = await startAgent([
      ...['--data-dir', dir.path, '--node', 'n', '--config', config],
      ...['--exclude', `cgroup:/kreplay-filters-${tag}/excluded`, '--include', `service:${late}`],
    ]);
    agents.push(agent);
    const out = join(dir.path, 'out');
    const inc = `kr-inc-${tag % 1000}`;
    const ex = `kr-ex-${tag % 1000}`;
    const pids = {
      service: run('kr-plain', `echo hi > ${out}`, inService),
      comm: run(inc, `echo hi > ${out}`),
      commInExcludedCgroup: run(inc, `echo hi > ${out}`, excludedGroup),
      other: run('kr-plain', `echo hi > ${out}`),
      // included by its service, excluded by its comm: only its transaction's writes stay
      excludedInTxn: run(
        ex,
        `printf 'KREPLAY-CTX txn=T${tag}' > /dev/null; echo in-txn > ${out}; printf KREPLAY-CTX > /dev/null; echo after > ${out}`,
        inService,
      ),
    };
    // a service whose cgroup appears while the agent runs is picked up at the next rescan
    const lateGroup = cgroup(`${late}.service`);
    await new Promise((r) => setTimeout(r, 3 * CGROUP_RESCAN_MS));
    const latePid = run('kr-plain', `echo hi > ${out}`, lateGroup);
    expect(await agent.stop()).toBe(0);

    expect(counts(store, 'kr-plain', pids.service)).toEqual([[3, service, null]]);
    expect(counts(store, inc, pids.comm)).toEqual([[3, inc, null]]);
    // only the write that moved it into the excluded cgroup
    expect(counts(store, inc, pids.commInExcludedCgroup)).toEqual([
      [String(pids.commInExcludedCgroup).length + 1, inc, null],
    ]);
    expect(counts(store, 'kr-plain', pids.other)).toEqual([]);
    // the marker and the write in its transaction; the closing marker and what follows are not in one
    expect(counts(store, ex, pids.excludedInTxn)).toEqual([
      [`KREPLAY-CTX txn=T${tag}`.length, service, `T${tag}`],
      [7, service, `T${tag}`],
    ]);
    expect(counts(store, 'kr-plain', latePid)).toEqual([[3, late, null]]);

    const db = new Database(store, { readonly: true });
    const runRow = db.prepare('SELECT sample_background, filter FROM runs').get() as {
      sample_background: number;
      filter: string;
    };
    db.close();
    expect(runRow.sample_background).toBe(1);
    expect(JSON.parse(runRow.filter)).toEqual({
      include: [`service:${service}`, `comm:${inc}`, `service:${late}`],
      exclude: [`comm:${ex}`, `cgroup:/kreplay-filters-${tag}/excluded`],
      filter_transactions: false,
    });
  });

  it('samples background writes one in N, records N, counts the rest, and the API marks the range', async () => {
    const oneIn = 10;
    const dd = named(
      `kr-dd-${tag % 10000}`,
      execFileSync('sh', ['-c', 'command -v dd'], { encoding: 'utf8' }).trim(),
    );
    const ddComm = `kr-dd-${tag % 10000}`;
    const shellComm = `kr-ss-${tag % 10000}`;
    const store = join(dir.path, 'n.db');
    const agent = await startAgent([
      ...['--data-dir', dir.path, '--node', 'n', '--sample-background', `1/${oneIn}`],
      ...['--include', `comm:${ddComm}`, '--include', `comm:${shellComm}`],
    ]);
    agents.push(agent);
    const dd1 = (bs: number, count: number) =>
      `${dd} if=/dev/zero of=/dev/null bs=${bs} count=${count} status=none`;
    // 20000 in the kernel's sampling, 1000 in a transaction, 2000 after a closing marker (sampled by the agent)
    run(
      shellComm,
      [
        dd1(2, 20_000),
        `printf 'KREPLAY-CTX txn=S${tag}' > /dev/null`,
        dd1(3, 1000),
        'printf KREPLAY-CTX > /dev/null',
        dd1(5, 2000),
      ].join('; '),
    );
    expect(await agent.stop()).toBe(0);

    const writes = readStoredEvents(store, 'e.type = 1').filter((e) => e.comm === ddComm);
    const kept = (bytes: number) => writes.filter((w) => w.bytes === bytes).length;
    const fiveSigma = (n: number) => 5 * Math.sqrt((n * (oneIn - 1)) / oneIn ** 2);
    expect(Math.abs(kept(2) - 20_000 / oneIn)).toBeLessThan(fiveSigma(20_000));
    expect(Math.abs(kept(5) - 2000 / oneIn)).toBeLessThan(fiveSigma(2000));
    expect(writes.filter((w) => w.bytes === 3).map((w) => w.txn)).toEqual(Array(1000).fill(`S${tag}`));
    // scaled back exactly: what was kept plus what was counted out is what was written, the shell's
    // own write outside a transaction (the closing marker) included
    const shellKept = readStoredEvents(store, 'e.type = 1').filter(
      (e) => e.comm === shellComm && e.txn === null,
    );
    expect(kept(2) + kept(5) + shellKept.length + storedCounter(store, 'sys_write_sampled_out')).toBe(22_001);

    const db = new Database(store, { readonly: true });
    const runRow = db
      .prepare('SELECT started_ns, stopped_ns, sample_background FROM runs')
      .safeIntegers(true)
      .get() as {
      started_ns: bigint;
      stopped_ns: bigint;
      sample_background: bigint;
    };
    db.close();
    expect(runRow.sample_background).toBe(BigInt(oneIn));
    const server = await startEventsServer(dir.path);
    try {
      const body = JSON.parse((await get(`${server.url}/api/events?limit=1&int64=string`)).text) as {
        sampled?: unknown;
      };
      expect(body.sampled).toEqual([
        { node: 'n', from_ns: String(runRow.started_ns), to_ns: String(runRow.stopped_ns), one_in: oneIn },
      ]);
      const byTxn = JSON.parse(
        (await get(`${server.url}/api/events?transaction_id=S${tag}&limit=1`)).text,
      ) as {
        sampled?: unknown;
      };
      expect(byTxn.sampled).toBeUndefined();
      const before = JSON.parse((await get(`${server.url}/api/events?to=${runRow.started_ns}`)).text) as {
        sampled?: unknown;
      };
      expect(before.sampled).toBeUndefined();
    } finally {
      await server.close();
    }
  });

  it("stores the block reads of an included shell's exec of a cold program under its pid, and the name it had then", async () => {
    const loop = createLoopDevice();
    try {
      const shellComm = `kr-cx-${tag % 10000}`;
      const programComm = `kr-cp-${tag % 10000}`;
      // a real program on the test's own device, none of its pages (nor the device's) in the page
      // cache once remounted: its exec reads them from the device, as on a fresh machine
      const program = join(loop.mountPoint, programComm);
      copyFileSync(execFileSync('sh', ['-c', 'command -v sleep'], { encoding: 'utf8' }).trim(), program);
      execFileSync('umount', [loop.mountPoint]);
      execFileSync('mount', [loop.device, loop.mountPoint]);
      const store = join(dir.path, 'n.db');
      const agent = await startAgent([
        ...['--data-dir', dir.path, '--node', 'n'],
        ...['--include', `comm:${shellComm}`, '--include', `comm:${programComm}`],
      ]);
      agents.push(agent);
      const stat = (file: string) =>
        readFileSync(`/sys/block/${loop.name}/${file}`, 'utf8').trim().split(/\s+/);
      const completedReads = () => Number(stat('stat')[0]);
      // nothing in flight and the reads held still (the mount's own are done)
      let last = -1;
      const settled = () => {
        const now = completedReads();
        const still = now === last && stat('inflight').every((n) => n === '0');
        last = now;
        return still;
      };
      await waitFor(settled, { everyMs: 300, what: `${loop.device} to settle` });
      const before = completedReads();
      // the exec's first reads are the shell's: its name changes only once the program is read
      const pid = run(shellComm, `exec ${program} 0`);
      await waitFor(settled, { everyMs: 300, what: `${loop.device} to settle` });
      const reads = completedReads() - before;
      expect(await agent.stop()).toBe(0);

      const dev = loop.major * 0x100000 + loop.minor;
      const stored = readStoredEvents(store, `e.type = ${RecordType.BlockIo} AND e.dev = ${dev}`).filter(
        (e) => blockOpName(e.op!) === 'read',
      );
      // every read the kernel completed on the device, none lost or doubled, all the one task's
      expect(reads).toBeGreaterThan(0);
      expect(stored).toHaveLength(reads);
      expect(new Set(stored.map((e) => e.pid))).toEqual(new Set([pid]));
      expect(stored.map((e) => e.comm)).toContain(shellComm);
      expect(stored.every((e) => e.comm === shellComm || e.comm === programComm)).toBe(true);
      expect(stored.every((e) => e.bytes > 0 && e.txn === null)).toBe(true);
    } finally {
      loop.remove();
    }
  });
});
