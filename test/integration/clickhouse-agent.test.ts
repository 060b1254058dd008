/**
 * The real agent shipping under faults (real kernel, real clickhouse-server):
 * ClickHouse stopped under a write storm and started again, and the agent
 * SIGKILLed mid-batch and restarted. Either way ClickHouse ends up holding
 * exactly the node file's events: none lost, none shown twice.
 *
 * The outage lasts KREPLAY_CH_OUTAGE_S seconds (default 10, what CI uses;
 * the 60 s runs with KREPLAY_CH_OUTAGE_S=60).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAgent } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { clickhouseAvailable, TestClickHouse } from '../support/clickhouse-server';
import { countStored, storedCounter } from '../support/store-rows';
import { waitFor } from '../support/wait';

const OUTAGE_S = Number(process.env.KREPLAY_CH_OUTAGE_S ?? 10);
const describeCh = clickhouseAvailable ? describe : describe.skip;
if (!clickhouseAvailable)
  console.warn('SKIPPED: clickhouse-server is not installed (make setup installs it)');

let dir: string;
let cgroup: TestCgroup;
let server: TestClickHouse;

async function counts(database: string): Promise<{ n: number; ids: number }> {
  const [row] = await server
    .client(database)
    .rows<{ n: string; ids: string }>('SELECT count() AS n, uniqExact(event_id) AS ids FROM events FINAL');
  return { n: Number(row!.n), ids: Number(row!.ids) };
}

/** Waits until ClickHouse holds as many events as the node file (polled asynchronously). */
async function caughtUp(database: string, store: string, timeoutMs = 60_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const stored = countStored(store);
    const shipped = await counts(database).catch(() => ({ n: -1, ids: -1 }));
    if (shipped.n === stored) return stored;
    if (Date.now() > deadline) throw new Error(`ClickHouse holds ${shipped.n} of ${stored} events`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Writes at a bounded rate (at most ~20,000/s) until killed, so catching up stays short. */
function storm() {
  return spawn(
    '/bin/sh',
    [
      '-c',
      `${cgroup.enter} sh -c 'while :; do dd if=/dev/zero of=/dev/null bs=64 count=1000 status=none; sleep 0.05; done'`,
    ],
    { stdio: 'ignore', detached: true },
  );
}

function stopStorm(child: ReturnType<typeof storm>): void {
  // the loop and its dd: the whole process group
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // already stopped
  }
}

describeCh('agent shipping under faults (real kernel, real ClickHouse)', () => {
  jest.setTimeout(60_000 + OUTAGE_S * 3000);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kreplay-ship-'));
    cgroup = createCgroup(`kreplay-ship-${process.pid}`);
    server = await TestClickHouse.create();
    await server.start();
  });
  afterAll(async () => {
    cgroup?.remove();
    await server?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  function agentArgs(data: string, node: string, database: string): string[] {
    return [
      ...['--data-dir', data, '--node', node, '--cgroup-id', String(cgroup.id)],
      ...['--ship', `clickhouse://127.0.0.1:${server.httpPort}/${database}`],
    ];
  }

  it(`loses and doubles nothing when ClickHouse stops for ${OUTAGE_S} s under a write storm`, async () => {
    const data = join(dir, 'outage');
    const store = join(data, 'out.db');
    const agent = await startAgent(agentArgs(data, 'out', 'outage'));
    const writes = storm();
    try {
      await waitFor(() => (countStored(store) > 20_000 ? true : undefined), 30_000);
      await server.stop();
      const atStop = countStored(store);
      await new Promise((r) => setTimeout(r, OUTAGE_S * 1000));
      // capture and local storage went on meanwhile, and the status line shows the lag
      expect(countStored(store)).toBeGreaterThan(atStop);
      expect(agent.output()).toMatch(/ship=retrying .*lag=[1-9]\d*ev/);
      await server.start();
      stopStorm(writes);
      await caughtUp('outage', store);
      expect(await agent.stop()).toBe(0);
      const stored = countStored(store);
      expect(await counts('outage')).toEqual({ n: stored, ids: stored });
      expect(storedCounter(store, 'ship_lag_events')).toBeGreaterThan(0);
    } finally {
      stopStorm(writes);
      await agent.stop('SIGKILL');
    }
  });

  it('loses and doubles nothing when the agent is SIGKILLed mid-batch and restarted', async () => {
    const data = join(dir, 'kill');
    const store = join(data, 'kill.db');
    const args = agentArgs(data, 'kill', 'killed');
    const first = await startAgent(args);
    const writes = storm();
    try {
      await waitFor(() => (countStored(store) > 50_000 ? true : undefined), 30_000);
      // kill while batches are being read and sent
      expect(await first.stop('SIGKILL')).toBeNull();
      stopStorm(writes);
      const second = await startAgent(args);
      try {
        await caughtUp('killed', store);
      } finally {
        expect(await second.stop()).toBe(0);
      }
      const stored = countStored(store);
      expect(stored).toBeGreaterThan(50_000);
      expect(await counts('killed')).toEqual({ n: stored, ids: stored });
    } finally {
      stopStorm(writes);
      await first.stop('SIGKILL');
    }
  });
});
