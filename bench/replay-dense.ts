/**
 * A large, dense transaction replayed as a new user would: 200,000 events
 * recorded in 0.4 s (or as the arguments say: 300,000 in 3,000 ms is a dense
 * play three times longer than the second a play primes), replayed by
 * `kreplay replay` (its own process, printing NDJSON) from the real
 * `kreplay daemon` process, at speed 1 and then 1000. Meanwhile a poller of
 * its own (replay-poller) asks GET /healthz and a transaction lookup every
 * 10 ms. Reported: the session's release lateness (p50/p99/max, from its
 * record), NDJSON lines printed and how many carry no lateness
 * (emitted_late_ns null: caught up from the store), events per second end to
 * end, and /healthz and lookup latency during the replay against the same
 * requests with no replay (the anchor, just before). cyclictest runs beside
 * each replay (SCHED_FIFO 10, the clock thread's class where the daemon may
 * take it), so its max is the platform's wake-up latency under the very same
 * load.
 *
 *   node dist/bench/replay-dense.js [events] [rounds] [recorded_ms]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreWriter } from '../agent/store/store-writer';
import { repoRoot } from '../core/repo-root';
import { startDaemonProcess } from './daemon-process';
import { parseCyclictest, type Latency } from './replay';
import { pollDaemon, quantile, writeEvenTransaction, writeLookupTransactions } from './replay-data';
import { printTable } from './table';

const KREPLAY = join(repoRoot(), 'bin', 'kreplay.js');
const POLL_MS = 10;
const log = (msg: string) => process.stderr.write(`[bench:replay-dense] ${msg}\n`);

function writeData(dir: string, events: number, recordedNs: number): void {
  const writer = StoreWriter.open(dir, 'n1');
  writeEvenTransaction(writer, 'dense', events, recordedNs);
  // what the lookups ask for, later in time
  writeLookupTransactions(writer);
  writer.close();
}

const poll = (url: string, until: Promise<unknown>) => pollDaemon(url, until, POLL_MS);

interface Run {
  speed: number;
  lines: number;
  nullLateness: number;
  /** first and last release, ns after the play's anchor */
  firstReleaseNs: number;
  lastReleaseNs: number;
  releaseP50Ms: number;
  releaseP99Ms: number;
  releaseMaxMs: number;
  wallSeconds: number;
  health: number[];
  lookup: number[];
  /** cyclictest's latencies (µs) while the replay ran */
  cyclictest: Latency;
}

/** cyclictest (1 kHz, SCHED_FIFO 10 like the clock thread) for `seconds`, under whatever load runs meanwhile. */
function cyclictest(seconds: number): Promise<Latency> {
  const child = spawn(
    'cyclictest',
    ['-m', '-q', '-p', '10', '-D', `${seconds}s`, '-i', '1000', '-h', '2000'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', () => resolve(parseCyclictest(out)));
  });
}

async function replay(url: string, speed: number): Promise<Run> {
  const started = process.hrtime.bigint();
  // the replay takes ~0.4 s / speed plus its start: cyclictest covers that much
  const anchor = cyclictest(Math.max(2, Math.ceil(0.4 / speed) + 2));
  const cli = spawn(
    process.execPath,
    [KREPLAY, 'replay', 'dense', '--speed', String(speed), '--server', url],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let lines = 0;
  let nullLateness = 0;
  let firstReleaseNs = Infinity;
  let lastReleaseNs = -Infinity;
  let rest = '';
  cli.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const text = rest + chunk;
    const parts = text.split('\n');
    rest = parts.pop()!;
    for (const line of parts) {
      if (!line.startsWith('{')) continue;
      lines++;
      if (line.includes('"emitted_late_ns":null')) nullLateness++;
      const offset = /"replay_offset_ns":"?(\d+)/.exec(line);
      const late = /"emitted_late_ns":"?(\d+)/.exec(line);
      if (offset && late) {
        const at = Number(offset[1]) + Number(late[1]);
        if (at < firstReleaseNs) firstReleaseNs = at;
        if (at > lastReleaseNs) lastReleaseNs = at;
      }
    }
  });
  let errText = '';
  cli.stderr.setEncoding('utf8').on('data', (chunk: string) => (errText += chunk));
  const exited = new Promise<number | null>((resolve) => cli.once('exit', resolve));
  const { health, lookup } = await poll(url, exited);
  const code = await exited;
  if (code !== 0) throw new Error(`kreplay replay exited ${code}: ${errText}`);
  const wallSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  const list = (await (await fetch(`${url}/api/replay/sessions`)).json()) as {
    sessions?: { timing: Record<string, number | null> }[];
  };
  const sessions = list.sessions ?? (list as unknown as { timing: Record<string, number | null> }[]);
  const timing = sessions.at(-1)!.timing;
  return {
    speed,
    lines,
    nullLateness,
    firstReleaseNs,
    lastReleaseNs,
    releaseP50Ms: Number(timing.lateness_p50_ns) / 1e6,
    releaseP99Ms: Number(timing.lateness_p99_ns) / 1e6,
    releaseMaxMs: Number(timing.lateness_max_ns) / 1e6,
    wallSeconds,
    health,
    lookup,
    cyclictest: await anchor,
  };
}

async function main(): Promise<void> {
  const events = Number(process.argv[2] ?? 200_000);
  const rounds = Number(process.argv[3] ?? 2);
  const recordedNs = Number(process.argv[4] ?? 400) * 1e6;
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-bench-dense-'));
  log(`writing ${events} events of one transaction over ${recordedNs / 1e6} ms to ${dir}`);
  writeData(dir, events, recordedNs);
  const daemon = await startDaemonProcess(['--data-dir', dir], join(dir, 'daemon.log'));
  const rows: string[][] = [];
  try {
    for (let round = 1; round <= rounds; round++) {
      // the anchor: the same requests for 2 s with no replay
      const quiet = await poll(daemon.url, new Promise((resolve) => setTimeout(resolve, 2000)));
      rows.push([
        String(round),
        'no replay (anchor)',
        '',
        '',
        '',
        '',
        '',
        '',
        `${quantile(quiet.health, 0.99).toFixed(2)}`,
        `${quantile(quiet.lookup, 0.99).toFixed(2)}`,
      ]);
      for (const speed of [1, 1000]) {
        log(`round ${round}: speed ${speed}`);
        const r = await replay(daemon.url, speed);
        rows.push([
          String(round),
          `speed ${speed}, ${r.wallSeconds.toFixed(2)} s`,
          `${r.lines}`,
          `${r.nullLateness}`,
          `${r.releaseP50Ms.toFixed(3)} / ${r.releaseP99Ms.toFixed(3)} / ${r.releaseMaxMs.toFixed(1)}`,
          `${Math.round(r.lines / r.wallSeconds)}`,
          `${Math.round(((r.lines - 1) * 1e9) / Math.max(1, r.lastReleaseNs - r.firstReleaseNs))}`,
          `${(r.cyclictest.p99 / 1000).toFixed(3)} / ${(r.cyclictest.max / 1000).toFixed(3)}`,
          `${quantile(r.health, 0.99).toFixed(2)} (max ${Math.max(...r.health).toFixed(1)})`,
          `${quantile(r.lookup, 0.99).toFixed(2)} (max ${Math.max(...r.lookup).toFixed(1)})`,
        ]);
      }
    }
  } finally {
    await daemon.stop();
    if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
  }
  printTable(`replay-dense: ${events} events recorded in ${recordedNs / 1e6} ms, one transaction; ms`, rows, [
    'round',
    'run',
    'NDJSON lines',
    'lateness null',
    'release p50 / p99 / max',
    'lines/s end to end',
    'clock releases/s',
    'cyclictest p99 / max',
    '/healthz p99',
    'lookup p99',
  ]);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
