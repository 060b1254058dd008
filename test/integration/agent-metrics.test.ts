/** `kreplay agent --metrics-listen`: the real agent, scraped before and after a writer of known size. */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_COMMIT_WAIT_MS } from '../../agent/commit-cadence';
import { RecordType } from '../../core/model/record-layout';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { countStored } from '../support/store-rows';
import { waitFor } from '../support/wait';

let dir: string;
let agent: AgentProcess | undefined;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-metrics-'));
});

afterAll(async () => {
  await agent?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The value of one sample (`name{labels} value`), or undefined when the scrape lacks it. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function scrape(url: string): Promise<string> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

describe('agent metrics (real kernel)', () => {
  it('counts exactly the writes of a test writer, and serves the ring, store and clock figures', async () => {
    // A copy of dd under a name of its own: the agent's --comm filter then sees only its writes.
    const comm = `krmet${process.pid}`.slice(0, 15);
    const writer = join(dir, comm);
    copyFileSync('/bin/dd', writer);
    const store = join(dir, 'metrics.db');
    agent = await startAgent([
      '--data-dir',
      dir,
      '--node',
      'metrics',
      '--comm',
      comm,
      // other processes' transactions (their writes, sends and reads) would be stored meanwhile
      '--filter-transactions',
      '--metrics-listen',
      '127.0.0.1:0',
    ]);
    const url = /serving metrics url=(\S+)/.exec(agent.output())?.[1];
    expect(url).toBeDefined();

    const before = await scrape(url!);
    const writesBefore = sample(before, 'kreplay_agent_events_total{type="sys_write"}') ?? 0;
    const storedBefore = sample(before, 'kreplay_agent_stored_events_total') ?? 0;
    expect(sample(before, 'kreplay_agent_dropped_total{reason="sys_write_ring_full"}')).toBe(0);

    const writes = 1234;
    const dd = spawnSync(writer, ['if=/dev/zero', 'of=/dev/null', 'bs=64', `count=${writes}`, 'status=none']);
    expect(dd.status).toBe(0);
    const running = agent;
    // its page faults may also read from disk under its name (block I/O) when the page cache was
    // dropped: events too, but not the writes counted here
    const ddWrites = () => countStored(store, `type = ${RecordType.SysWrite}`);
    await waitFor(() => (ddWrites() >= writes ? true : undefined), {
      what: () =>
        `${ddWrites()} of ${writes} writes stored; the agent's output ends:\n${running.output().slice(-2000)}`,
    });

    const after = await waitFor(async () => {
      const text = await scrape(url!);
      return sample(text, 'kreplay_agent_stored_events_total') === storedBefore + countStored(store)
        ? text
        : undefined;
    });
    // the kernel also sends writes of excluded tasks that carry a context (the agent drops them): at least these
    expect(sample(after, 'kreplay_agent_events_total{type="sys_write"}')).toBeGreaterThanOrEqual(
      writesBefore + writes,
    );
    expect(ddWrites()).toBe(writes);
    // every batch the store committed is in the histograms: their event counts add up to what it stored
    expect(sample(after, 'kreplay_agent_store_batch_events_sum')).toBe(countStored(store));
    expect(sample(after, 'kreplay_agent_store_commit_seconds_count')).toBe(
      sample(after, 'kreplay_agent_store_batch_events_count'),
    );
    expect(sample(after, 'kreplay_agent_ring_batch_bytes_count')).toBeGreaterThan(0);
    expect(sample(after, 'kreplay_agent_store_bytes')).toBeGreaterThan(0);
    const clockError = sample(after, 'kreplay_agent_clock_error_seconds');
    expect(clockError).toBeGreaterThan(0);
    expect(clockError).toBeLessThan(0.001);
    const fill = sample(after, 'kreplay_agent_ring_fill_ratio');
    expect(fill).toBeGreaterThanOrEqual(0);
    expect(fill).toBeLessThanOrEqual(1);
    expect(after).toMatch(/^# TYPE kreplay_agent_dropped_total counter$/m);
    expect(after).toMatch(/^process_resident_memory_bytes \d+/m);

    expect((await fetch(url!.replace('/metrics', '/other'))).status).toBe(404);
    expect(await agent.stop()).toBe(0);
    agent = undefined;
  });

  it("commits a steady stream's writes about once a second, and a burst's once it ends", async () => {
    // dash under a name of its own: its echo writes once a line, and the --comm filter sees only those
    const comm = `krcad${process.pid}`.slice(0, 15);
    const shell = join(dir, comm);
    copyFileSync('/bin/dash', shell);
    const store = join(dir, 'cadence.db');
    agent = await startAgent([
      '--data-dir',
      dir,
      '--node',
      'cadence',
      '--comm',
      comm,
      '--filter-transactions',
      // the default, which startAgent's shorter wait for tests would replace
      '--max-commit-wait-ms',
      String(MAX_COMMIT_WAIT_MS.default),
      '--metrics-listen',
      '127.0.0.1:0',
    ]);
    const url = /serving metrics url=(\S+)/.exec(agent.output())?.[1];
    const commits = async () => sample(await scrape(url!), 'kreplay_agent_store_batch_events_count') ?? 0;
    // the shell's echoes; its forks' execs may also read from disk under its name (block I/O) when
    // the page cache was dropped, which are events too but not the stream's
    const echoes = () => countStored(store, `type = ${RecordType.SysWrite}`);
    // the histograms are fed when the writer's commit message is read: wait on them, not the file alone
    const stored = (events: number) => async () =>
      echoes() === events &&
      sample(await scrape(url!), 'kreplay_agent_store_batch_events_sum') === countStored(store);
    const run = (script: string) => {
      const sh = spawnSync(shell, ['-c', `${script} >/dev/null`]);
      expect(sh.status).toBe(0);
    };

    // 250 writes 20 ms apart at least: a stream of 5 s or more, which every 200 ms made 25 commits
    const stream = 250;
    const before = await commits();
    run(`i=0; while [ $i -lt ${stream} ]; do echo x; sleep 0.02; i=$((i+1)); done`);
    await waitFor(stored(stream), { what: () => `${echoes()} of ${stream} echoes stored` });
    const streamCommits = (await commits()) - before;
    expect(streamCommits).toBeGreaterThan(0);
    expect(streamCommits).toBeLessThanOrEqual(12);

    // a burst with nothing after it is committed without waiting for more (waited on, not timed)
    const burst = 1000;
    run(`i=0; while [ $i -lt ${burst} ]; do echo x; i=$((i+1)); done`);
    await waitFor(stored(stream + burst), {
      what: () => `${echoes()} of ${stream + burst} echoes stored`,
    });
    expect(await agent.stop()).toBe(0);
    agent = undefined;
  });

  it('refuses a taken --metrics-listen address, naming it', async () => {
    const first = await startAgent([
      '--data-dir',
      dir,
      '--node',
      'taken',
      '--comm',
      'nobody-at-all',
      '--metrics-listen',
      '127.0.0.1:0',
    ]);
    const url = /serving metrics url=(\S+)/.exec(first.output())?.[1];
    const address = new URL(url!).host;
    const second = spawnSync(
      process.execPath,
      [
        join(__dirname, '..', '..', 'bin', 'kreplay.js'),
        'agent',
        '--data-dir',
        dir,
        '--node',
        'taken2',
        '--metrics-listen',
        address,
      ],
      {
        encoding: 'utf8',
        timeout: 30000,
      },
    );
    expect(await first.stop()).toBe(0);
    expect(second.status).toBe(1);
    expect(second.stderr).toContain(`--metrics-listen ${address}: listen EADDRINUSE`);
  });
});
