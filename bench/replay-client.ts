/**
 * A replay on time, as its client sees it (issue 48): the real `kreplay
 * daemon` process, and each consumer in a process of its own
 * (bench/replay-probe.ts) taking the moment every event reaches it: the
 * CLI's NDJSON stream (`kreplay replay` on a pipe) and an SSE client (the
 * timeline page's stream). Per run:
 * - "late": each event's arrival against its schedule, anchor + replay_offset_ns;
 *   the client cannot read the daemon's anchor, so it is taken as the
 *   earliest arrival − offset of the run (what the best-served event took
 *   to reach it, loopback and the client's reading included, counts as 0);
 * - "vs first": |(arrival_i − arrival_0) − (offset_i − offset_0)|, the
 *   schedule seen relative to the first event (a first event that takes
 *   another path shows as a constant offset here);
 * - the first event's own lateness, the latest event and the lateness the
 *   server released it with (late there: the daemon held it; on time: a hop
 *   after the release did), the server's release p99
 *   (emitted_late_ns), and, during the dense runs, GET /healthz and an event
 *   page asked every POLL_MS by this process, against the same requests
 *   with no replay just before, and the CPU the daemon used meanwhile.
 * Per round, the host's anchor: the sparse session's schedule written by a
 * bare C process (bench/timedlines.c, SCHED_FIFO as the daemon's clock)
 * into the probe's pipe, as `kreplay replay` writes, with no daemon and no
 * CLI between: what the host gives any timed writer (its "vs first" max is
 * the floor the sparse rows' is measured against); and the dense incident's
 * schedule written the same way, timed in the clock's dense looks and sent
 * through a dense CLI play's hops (a loopback TCP socket, a bare relay
 * process, the pipe), while the daemon answers the same polls as during a
 * dense play: its late p99 is the floor of the dense rows'.
 * Three shapes: a sparse session (300 events, 10 ms apart) on an idle
 * daemon, the same under a query load (~440 event pages a second), and a
 * dense incident (100,001 events, 10 µs apart: 1 s); the fresh daemon's
 * first play (sparse, by the CLI, as a user's first replay) and its first
 * dense play, which compiles the dense path as it plays, are rows of their
 * own (round 0) before the rounds. KREPLAY_BENCH_ROOT runs
 * another checkout's build (its daemon and CLI; the bench and its clients
 * stay this one's), to compare two builds in the same hour.
 * KREPLAY_BENCH_DAEMON=unprivileged runs the daemon as uid 65534 without
 * capabilities or real-time allowance (its replay clock then runs under
 * SCHED_OTHER), as a daemon started by hand by a user runs; by default it
 * runs as the bench does (root: SCHED_FIFO). Per CLI run, the CLI's main
 * thread's time on a CPU and waiting for one while it streamed; per dense
 * run and unloaded sparse run, the daemon's CPU and its main thread's (the
 * times it ran: its wake-ups, each a core taken from the hops after the
 * release); per run, the probe's own main thread's (the measuring client is
 * a hop too).
 *
 *   node dist/bench/replay-client.js [rounds]
 */
import { spawn } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreWriter } from '../agent/store/store-writer';
import { repoRoot } from '../core/repo-root';
import { DENSE_LOOK_NS } from '../daemon/replay/clock/early-wake';
import { benchLoop } from './bench-loops';
import { startDaemonProcess } from './daemon-process';
import {
  getOk,
  LOOKUPS,
  pollDaemon,
  quantile,
  writeEvenTransaction,
  writeLookupTransactions,
} from './replay-data';
import type { ProbeResult } from './replay-probe';
import { timing, type Timing } from './replay-timing';
import { printTable } from './table';
import { schedSince, schedStat, type SchedStat } from './thread-schedstat';

const SPARSE_EVENTS = 300;
const SPARSE_NS = 3_000_000_000;
const DENSE_EVENTS = 100_001;
const DENSE_NS = 1_000_010_000;
const POLL_MS = 5;
const LOAD_PER_SECOND = 440;
const ROOT = process.env.KREPLAY_BENCH_ROOT ?? repoRoot();
const log = (msg: string) => process.stderr.write(`[bench:replay-client] ${msg}\n`);
/** uid 65534 (nobody), no capability, no real-time or nice allowance: SCHED_FIFO and nice -10 refused */
const NOBODY = 65534;
const UNPRIVILEGED = [
  'prlimit',
  '--rtprio=0:0',
  '--nice=0:0',
  '--',
  'setpriv',
  `--reuid=${NOBODY}`,
  `--regid=${NOBODY}`,
  '--clear-groups',
  '--inh-caps=-all',
  '--bounding-set=-all',
  '--no-new-privs',
  '--',
];
const unprivileged = process.env.KREPLAY_BENCH_DAEMON === 'unprivileged';

/** A data dir the unprivileged daemon reads, and writes its sessions beside. */
function handToNobody(dir: string): void {
  chownSync(dir, NOBODY, NOBODY);
  for (const file of readdirSync(dir, { recursive: true, encoding: 'utf8' }))
    chownSync(join(dir, file), NOBODY, NOBODY);
}

/** ms run / ms waited for a core (times run) */
const sched = (s: SchedStat | undefined) =>
  s ? `${(s.runNs / 1e6).toFixed(1)} / ${(s.waitNs / 1e6).toFixed(1)} (${s.slices})` : '';

function writeData(dir: string): void {
  const writer = StoreWriter.open(dir, 'n1');
  writeEvenTransaction(writer, 'sparse', SPARSE_EVENTS, SPARSE_NS);
  writeEvenTransaction(writer, 'dense', DENSE_EVENTS, DENSE_NS);
  writeLookupTransactions(writer);
  writer.close();
}

const poll = (url: string, until: Promise<unknown>) => pollDaemon(url, until, POLL_MS);

/** Event pages at LOAD_PER_SECOND until `until` settles; resolves with the rate reached. */
async function load(url: string, until: Promise<unknown>): Promise<number> {
  let done = false;
  void until.finally(() => (done = true));
  const started = performance.now();
  let sent = 0;
  const inFlight = new Set<Promise<void>>();
  while (!done) {
    const due = Math.floor(((performance.now() - started) / 1000) * LOAD_PER_SECOND);
    for (; sent < due && inFlight.size < 32; sent++) {
      const request = getOk(`${url}/api/events?transaction_id=lookup-${sent % LOOKUPS}&limit=100`);
      inFlight.add(request);
      void request.finally(() => inFlight.delete(request));
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  await Promise.all(inFlight);
  return sent / ((performance.now() - started) / 1000);
}

/** CPU seconds (user + system) process `pid` has used: fields 14 and 15 of /proc/PID/stat, in ticks of 1/100 s. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Event streams the daemon has cut for falling behind (NaN: a build without the count). */
async function streamCuts(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^kreplay_sse_streams_cut_total (\d+)$/m.exec(text)?.[1] ?? NaN);
}

/**
 * A probe's run. The CLI resumes a cut stream unseen by the probe, which
 * reads its stdout: its cuts are the daemon's count over the run.
 */
async function probe(mode: 'sse' | 'cli', url: string, transaction: string): Promise<ProbeResult> {
  const cutsBefore = await streamCuts(url);
  const result = await probeRun(mode, url, transaction);
  if (mode === 'cli') result.cuts = (await streamCuts(url)) - cutsBefore;
  return result;
}

/**
 * The probe's old generation starts at a size of its own: by default V8
 * lowers its first limit to what a young process holds, and the code the
 * probe compiles while it reads (and what it keeps) crossed it during the
 * play, a full collection pausing the probe 13–20 ms in 2 of 4 CLI runs.
 * The CLI under test runs as users run it, without this.
 */
const PROBE_NODE_FLAGS = ['--initial-old-space-size=64'];

function probeRun(mode: 'sse' | 'cli', url: string, transaction: string): Promise<ProbeResult> {
  return runProbe([mode, url, transaction, '1']);
}

/**
 * A session's schedule played by bench/timedlines.c, read as the CLI's stream is: the host's own
 * floor. The dense one is timed as the daemon's clock times a dense stretch (a look at most every
 * DENSE_LOOK_NS, each writing what is due in one write) and goes through a dense CLI play's hops: a
 * loopback TCP socket, a relay process with the CLI's slice, the pipe to this reader.
 */
function anchorRun(shape: 'sparse' | 'dense'): Promise<ProbeResult> {
  const [events, spanNs] = shape === 'sparse' ? [SPARSE_EVENTS, SPARSE_NS] : [DENSE_EVENTS, DENSE_NS];
  return runProbe([
    'anchor',
    benchLoop('timedlines'),
    String(events),
    String(spanNs / events),
    ...(shape === 'dense' ? [String(DENSE_LOOK_NS), 'relay'] : []),
  ]);
}

function runProbe(args: string[]): Promise<ProbeResult> {
  const mode = args[0]!;
  const probePath = join(__dirname, 'replay-probe.js');
  const child = spawn(process.execPath, [...PROBE_NODE_FLAGS, probePath, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, KREPLAY_BENCH_ROOT: ROOT },
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0
        ? resolve(JSON.parse(out) as ProbeResult)
        : reject(new Error(`probe ${mode} exited ${code}`)),
    );
  });
}

const f = (ms: number, digits = 2) => (Number.isFinite(ms) ? ms.toFixed(digits) : '-');

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 3);
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-bench-client-'));
  log(`writing ${SPARSE_EVENTS} and ${DENSE_EVENTS} events to ${dir}`);
  writeData(dir);
  if (unprivileged) handToNobody(dir);
  const daemonLog = join(dir, 'daemon.log');
  const daemon = await startDaemonProcess(
    ['--data-dir', dir],
    daemonLog,
    ROOT,
    unprivileged ? UNPRIVILEGED : [],
  );
  log(
    readFileSync(daemonLog, 'utf8')
      .split('\n')
      .find((line) => line.includes('replay clock started')) ?? '',
  );
  const rows: string[][] = [];
  const row = (round: number, run: string, r: ProbeResult | null, t: Timing | null, extra: string[]) =>
    rows.push([
      String(round),
      run,
      r ? `${r.events}${r.outOfOrder ? ` (${r.outOfOrder} out of order)` : ''}` : '',
      r ? (Number.isNaN(r.cuts) ? '?' : String(r.cuts)) : '',
      r ? String(r.nullLateness) : '',
      t ? `${f(t.late.p50)} / ${f(t.late.p99)} / ${f(t.late.max)}` : '',
      t ? `${f(t.vsFirst.p50)} / ${f(t.vsFirst.max)}` : '',
      t ? `${f(t.firstLate)} (${f(t.firstRelease, 3)})` : '',
      t ? `${t.latest.index} (${f(t.latest.release, 3)})` : '',
      t ? f(t.releaseP99, 3) : '',
      ...extra,
      sched(r?.reader),
      sched(r?.probe),
    ]);
  try {
    // a fresh daemon's first play, as a user's first `kreplay replay` meets it: its first event must
    // go out as the others do (issue 48); then its first dense play, which compiles the dense path
    // while it plays (replay48k): round 0, so that the rounds' CLI and SSE plays are alike
    log("round 0: the daemon's first play, sparse, cli");
    const fresh = await probe('cli', daemon.url, 'sparse');
    row(0, "sparse, cli, the daemon's first", fresh, timing(fresh), ['', '', '', '', '']);
    log("round 0: the daemon's first dense play, sse");
    const first = await probe('sse', daemon.url, 'dense');
    row(0, "dense, sse, the daemon's first", first, timing(first), ['', '', '', '', '']);
    for (let round = 1; round <= rounds; round++) {
      const quiet = await poll(daemon.url, new Promise((resolve) => setTimeout(resolve, 2000)));
      row(round, 'no replay (anchor)', null, null, [
        f(quantile(quiet.health, 0.99)),
        f(quantile(quiet.lookup, 0.99)),
        '',
        '',
        '',
      ]);
      log(`round ${round}: the host's anchor, ${SPARSE_EVENTS} lines from a bare timed process`);
      const bare = await anchorRun('sparse');
      row(round, "sparse, the host's anchor (bench/timedlines.c)", bare, timing(bare), ['', '', '', '', '']);
      // a dense CLI play's hops with no JavaScript in them, and the same requests to the daemon
      // meanwhile: what this host's scheduling gives a dense stream at all
      log(`round ${round}: the host's anchor, ${DENSE_EVENTS} lines, dense, the daemon polled`);
      const bareDense = anchorRun('dense');
      const polledBare = await poll(daemon.url, bareDense);
      const dense = await bareDense;
      row(round, "dense, the host's anchor (bench/timedlines.c, relayed)", dense, timing(dense), [
        f(quantile(polledBare.health, 0.99)),
        f(quantile(polledBare.lookup, 0.99)),
        '',
        '',
        '',
      ]);
      for (const mode of ['cli', 'sse'] as const) {
        log(`round ${round}: sparse, ${mode}`);
        const idleCpu = cpuSeconds(daemon.child.pid!);
        const idleMain = schedStat(daemon.child.pid!)!;
        const idle = await probe(mode, daemon.url, 'sparse');
        row(round, `sparse, ${mode}`, idle, timing(idle), [
          '',
          '',
          '',
          (cpuSeconds(daemon.child.pid!) - idleCpu).toFixed(2),
          sched(schedSince(idleMain, schedStat(daemon.child.pid!)!)),
        ]);
        log(`round ${round}: sparse under load, ${mode}`);
        const loaded = probe(mode, daemon.url, 'sparse');
        const rate = await load(daemon.url, loaded);
        const busy = await loaded;
        row(round, `sparse, ${mode}, loaded`, busy, timing(busy), ['', '', rate.toFixed(0), '', '']);
        log(`round ${round}: dense, ${mode}`);
        const cpuBefore = cpuSeconds(daemon.child.pid!);
        const mainBefore = schedStat(daemon.child.pid!)!;
        const dense = probe(mode, daemon.url, 'dense');
        const polled = await poll(daemon.url, dense);
        const seen = await dense;
        row(round, `dense, ${mode}`, seen, timing(seen), [
          f(quantile(polled.health, 0.99)),
          f(quantile(polled.lookup, 0.99)),
          '',
          (cpuSeconds(daemon.child.pid!) - cpuBefore).toFixed(2),
          sched(schedSince(mainBefore, schedStat(daemon.child.pid!)!)),
        ]);
      }
    }
  } finally {
    await daemon.stop();
    if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
  }
  printTable(`replay-client: arrival at the client against the schedule, speed 1; ms`, rows, [
    'round',
    'run',
    'events',
    'cuts',
    'lateness null',
    'late p50 / p99 / max',
    'vs first p50 / max',
    'first late (its release)',
    'latest event (its release)',
    'release p99',
    '/healthz p99',
    'event page p99',
    'load req/s',
    'daemon CPU s',
    'daemon main: run / wait ms (times run)',
    'CLI main, streaming: run / wait ms (times run)',
    'probe main: run / wait ms (times run)',
  ]);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
