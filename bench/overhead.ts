/**
 * What tracing adds to one write(2): a C loop of 64-byte writes to
 * /dev/null, timed without tracing, under the `kreplay agent` process users
 * run (decode, attribution, SQLite), under the capture library alone with a
 * counting callback (with and without attribution, with and without write
 * targets), under an equivalent bpftrace program and under empty programs on
 * the same tracepoints (the floor no program can go below), interleaved
 * round by round; medians are compared. Then the agent process's own CPU per
 * event (user and system, from /proc) at 10k, 100k and as many events/s as
 * the loop makes.
 *
 *   node dist/bench/overhead.js [writes] [rounds] [mode,mode...] [read iterations]
 */
import { repoRoot } from '../core/repo-root';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startCapture, type CaptureOptions } from '../agent/capture';
import { createLogger, type Logger } from '../core/log/logger';
import { RecordHead } from '../core/model';
import { startBenchAgent } from './agent-process';
import { benchLoop, timeLoop } from './bench-loops';
import { withBpfStats } from './bpf-stats';

export type OverheadMode =
  | 'baseline'
  | 'kreplay-agent'
  | 'kreplay-agent-excluded'
  | 'kreplay'
  | 'kreplay-excluded'
  | 'kreplay-excluded-filter-txn'
  | 'kreplay-no-attribution'
  | 'kreplay-no-targets'
  | 'bpftrace'
  | 'empty-tracepoints';
const MODES: OverheadMode[] = [
  'baseline',
  'kreplay-agent',
  'kreplay-agent-excluded',
  'kreplay',
  'kreplay-excluded',
  'kreplay-excluded-filter-txn',
  'kreplay-no-targets',
  'kreplay-no-attribution',
  'bpftrace',
  'empty-tracepoints',
];
/** The kreplay modes and the capture options each one runs with. */
const KREPLAY_MODES: Partial<Record<OverheadMode, CaptureOptions>> = {
  kreplay: {},
  // the loop's writes excluded in the kernel (--exclude comm:): what an excluded write costs
  'kreplay-excluded': { exclude: [{ comm: 'writeloop' }] },
  // and --filter-transactions: the excluded task is not looked at for markers either
  'kreplay-excluded-filter-txn': { exclude: [{ comm: 'writeloop' }], filterTransactions: true },
  'kreplay-no-attribution': { attribution: false },
  'kreplay-no-targets': { targets: false },
};

/** Pairs enter and exit per thread in a map, as kreplay does, and keeps a latency histogram. */
const BPFTRACE_PROGRAM = `
tracepoint:syscalls:sys_enter_write { @start[tid] = nsecs; }
tracepoint:syscalls:sys_exit_write /@start[tid]/ { @ns = hist(nsecs - @start[tid]); delete(@start[tid]); }
`;
const EMPTY_PROGRAM = 'tracepoint:syscalls:sys_enter_write {} tracepoint:syscalls:sys_exit_write {}';

/**
 * The read side (sys_read events, context from request heads):
 * bench/readloop.c times a read of a regular file by a thread without a
 * context (no event: kreplay's read programs only look at the thread's bit)
 * and by one with a context (every read an event), a sendto+recvfrom pair of
 * binary bytes on a unix socket (the send a sys_write event), and the same
 * pair carrying an HTTP request head, without tracing, under kreplay, under
 * bpftrace pairing enter and exit of the same calls, and under empty
 * programs on the tracepoints kreplay uses for them (their floor).
 */
export type ReadLoop = 'file' | 'file-context' | 'socket' | 'http';
const READ_LOOPS: ReadLoop[] = ['file', 'file-context', 'socket', 'http'];
/** kreplay-agent: the `kreplay agent` process users run (defaults: a thread's reads recorded only in a context) */
export type ReadMode = 'baseline' | 'kreplay-agent' | 'kreplay' | 'bpftrace' | 'empty-tracepoints';
const READ_MODES: ReadMode[] = ['baseline', 'kreplay-agent', 'kreplay', 'bpftrace', 'empty-tracepoints'];
const READ_TRACEPOINTS = ['sys_enter_read', 'sys_exit_read'];
const RECV_TRACEPOINTS = ['sys_enter_recvfrom', 'sys_exit_recvfrom', 'sys_enter_sendto', 'sys_exit_sendto'];
/** kreplay's programs on each loop's calls, the first one running once per iteration */
const READ_PROGRAMS: Record<ReadLoop, string[]> = {
  file: READ_TRACEPOINTS,
  'file-context': READ_TRACEPOINTS,
  socket: RECV_TRACEPOINTS,
  http: RECV_TRACEPOINTS,
};
const emptyPrograms = (names: string[]) => names.map((n) => `tracepoint:syscalls:${n} {}`).join(' ');
/** bpftrace pairing each call's enter and exit per thread, as BPFTRACE_PROGRAM does for write */
const pairingPrograms = (names: string[]) =>
  names
    .filter((n) => n.startsWith('sys_enter_'))
    .map((enter) => {
      const call = enter.slice('sys_enter_'.length);
      return (
        `tracepoint:syscalls:${enter} { @start[tid] = nsecs; } ` +
        `tracepoint:syscalls:sys_exit_${call} /@start[tid]/ { @ns = hist(nsecs - @start[tid]); delete(@start[tid]); }`
      );
    })
    .join(' ');

export interface ReadRow {
  loop: ReadLoop;
  /** ns per iteration by mode, one sample per round */
  samples: Record<ReadMode, number[]>;
  /** ns kreplay's programs ran per iteration (bpf_stats), one per round */
  programNs: number[];
  /** ns per run of each of those programs, one per round */
  perProgram: Record<string, number[]>;
  /** the same for empty programs on the same tracepoints (bpftrace's, under bpf_stats): the floor */
  floorNs: number[];
}

export interface OverheadRow {
  mode: OverheadMode;
  /** median over the rounds */
  nsPerWrite: number;
  addedNs: number;
  ratio: number;
  samples: number[];
}

export interface OverheadReport {
  writes: number;
  rounds: number;
  rows: OverheadRow[];
  /** kreplay with attribution minus without */
  attributionNs: number;
  /** kreplay with write targets minus without, in each round (the two run back to back) */
  targetsNs: number[];
  programNs: ProgramCost | null;
  /** records kreplay delivered and dropped over all its runs */
  recordsDelivered: number;
  recordsDropped: number;
  reads: { calls: number; rows: ReadRow[] } | null;
  agentCpu: AgentCpuRow[];
}

/** The agent process's CPU per event at one write rate. */
export interface AgentCpuRow {
  /** writes/s asked of the loop; 0 = as fast as it goes */
  rate: number;
  writes: number;
  stored: number;
  dropped: number;
  userUsPerEvent: number;
  systemUsPerEvent: number;
  /** the agent's resident memory: highest seen during the run (sampled every 100 ms) */
  peakRssMiB: number;
}

const AGENT_RATES = [10_000, 100_000, 0];
/* the loop's comm: the agent captures its writes only */
const LOOP_COMM = 'writeloop';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/*
 * The loop runs on the last CPU in every mode. bpftrace binds its perf
 * events to CPU 0, where its programs then cost ~400 ns more per write: off
 * CPU 0 it is measured at its best, and its empty programs give the floor.
 */
const LOOP_CPU = os.cpus().length - 1;

/** `newFilesIn`: a directory where each write goes to a new file; `rate`: writes/s (0: as fast as it goes). */
const timeWrites = (exe: string, writes: number, newFilesIn?: string, rate = 0) =>
  timeLoop(exe, [String(writes), String(LOOP_CPU), newFilesIn ?? '-', String(rate)]);

function countRecords(batch: Buffer): number {
  let n = 0;
  for (let at = 0; at < batch.length; at += batch.readUInt32LE(at + RecordHead.size)) n++;
  return n;
}

async function underKreplay(
  run: () => Promise<number>,
  options: CaptureOptions,
  log: Logger,
  totals: { delivered: number; dropped: number },
): Promise<number> {
  const capture = startCapture(options, (batch) => (totals.delivered += countRecords(batch)), log);
  try {
    return await run();
  } finally {
    await capture.stop();
    totals.dropped += capture.counters().sysWriteDropped;
  }
}

/** Times `run` under the agent process started with `args`. */
async function underAgent(args: string[], run: () => Promise<number>): Promise<number> {
  const agent = await startBenchAgent(repoRoot(), args);
  try {
    return await run();
  } finally {
    await agent.stop();
  }
}

/** Times the loop under the agent process; with `cpu`, also what the agent spent per event. */
async function underAgentProcess(
  exe: string,
  writes: number,
  rate = 0,
): Promise<{ nsPerWrite: number; cpu: AgentCpuRow }> {
  const agent = await startBenchAgent(repoRoot(), ['--include', `comm:${LOOP_COMM}`]);
  let peakRss = agent.rssBytes();
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, agent.rssBytes())), 100);
  try {
    const before = agent.cpu();
    const nsPerWrite = await timeWrites(exe, writes, undefined, rate);
    const { stored, dropped } = await agent.caughtUp(writes);
    const after = agent.cpu();
    clearInterval(sampler);
    const perEvent = (s: number) => (s * 1e6) / Math.max(1, stored);
    return {
      nsPerWrite,
      cpu: {
        rate,
        writes,
        stored,
        dropped,
        userUsPerEvent: perEvent(after.userS - before.userS),
        systemUsPerEvent: perEvent(after.systemS - before.systemS),
        peakRssMiB: peakRss / 2 ** 20,
      },
    };
  } finally {
    clearInterval(sampler);
    await agent.stop();
  }
}

const NEW_FILE_WRITES = 50_000;

/** ns the write programs run per write, by round: /dev/null and a new file per write, targets on and off. */
interface ProgramCost {
  on: number[];
  off: number[];
  newFileOn: number[];
  newFileOff: number[];
}
const WRITE_PROGRAMS = ['sys_enter_write', 'sys_exit_write'];

/**
 * The time kreplay's two write(2) programs spend per write, as the kernel
 * measures it (BPF run-time statistics): free of the noise other tenants add to
 * the loop's own timing, the library-level figure beside the loop's.
 */
async function programNsPerWrite(
  exe: string,
  writes: number,
  options: CaptureOptions,
  log: Logger,
  newFilesIn?: string,
): Promise<number> {
  const capture = startCapture(options, () => {}, log);
  try {
    await timeWrites(exe, writes, newFilesIn);
    const stats = capture.programStats().filter((s) => WRITE_PROGRAMS.includes(s.name));
    const runs = stats.find((s) => s.name === 'sys_enter_write')?.runCount ?? 0;
    return stats.reduce((sum, s) => sum + s.runTimeNs, 0) / runs;
  } finally {
    await capture.stop();
  }
}

/** Program time per write with targets on and off, back to back in each round (BPF run-time statistics on meanwhile). */
async function targetProgramCost(
  exe: string,
  writes: number,
  rounds: number,
  log: Logger,
): Promise<ProgramCost> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kreplay-newfiles-'));
  try {
    return await withBpfStats(async () => {
      const cost: ProgramCost = { on: [], off: [], newFileOn: [], newFileOff: [] };
      for (let round = 0; round < rounds; round++) {
        cost.on.push(await programNsPerWrite(exe, writes, {}, log));
        cost.off.push(await programNsPerWrite(exe, writes, { targets: false }, log));
        // the miss path: a path walk and a target record at every write
        cost.newFileOn.push(await programNsPerWrite(exe, NEW_FILE_WRITES, {}, log, dir));
        cost.newFileOff.push(await programNsPerWrite(exe, NEW_FILE_WRITES, { targets: false }, log, dir));
      }
      return cost;
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function underBpftrace(run: () => Promise<number>, program: string): Promise<number> {
  const bpftrace = spawn('bpftrace', ['-e', program], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => bpftrace.on('exit', () => resolve()));
  try {
    await new Promise<void>((resolve, reject) => {
      bpftrace.on('error', reject);
      bpftrace.on('exit', (code) => reject(new Error(`bpftrace exited ${code} before attaching`)));
      bpftrace.stdout.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('Attaching')) resolve();
      });
    });
    // bpftrace announces before it attaches
    await sleep(1000);
    return await run();
  } finally {
    bpftrace.kill('SIGINT');
    await exited;
  }
}

function timeMode(
  mode: OverheadMode,
  exe: string,
  writes: number,
  log: Logger,
  totals: { delivered: number; dropped: number },
): Promise<number> {
  const kreplay = KREPLAY_MODES[mode];
  const run = () => timeWrites(exe, writes);
  if (kreplay) return underKreplay(run, kreplay, log, totals);
  switch (mode) {
    case 'kreplay-agent':
      return underAgentProcess(exe, writes).then((r) => r.nsPerWrite);
    case 'kreplay-agent-excluded':
      // the agent runs, the loop's writes are left out in the kernel
      return underAgent(['--exclude', `comm:${LOOP_COMM}`], run);
    case 'bpftrace':
      return underBpftrace(run, BPFTRACE_PROGRAM);
    case 'empty-tracepoints':
      return underBpftrace(run, EMPTY_PROGRAM);
    default:
      return timeWrites(exe, writes);
  }
}

function timeReadMode(
  loop: ReadLoop,
  mode: ReadMode,
  exe: string,
  calls: number,
  log: Logger,
  totals: { delivered: number; dropped: number },
): Promise<number> {
  const run = () => timeLoop(exe, [loop, String(calls), String(LOOP_CPU)]);
  if (mode === 'kreplay') return underKreplay(run, {}, log, totals);
  if (mode === 'kreplay-agent') return underAgent([], run);
  if (mode === 'empty-tracepoints') return underBpftrace(run, emptyPrograms(READ_PROGRAMS[loop]));
  if (mode === 'bpftrace') return underBpftrace(run, pairingPrograms(READ_PROGRAMS[loop]));
  return run();
}

/** BPF_OBJ_NAME_LEN less its NUL */
const BPF_NAME_CHARS = 15;

interface ProgramInfo {
  id: number;
  name: string;
  map_ids?: number[];
  run_time_ns?: number;
  run_cnt?: number;
}
const programs = (): ProgramInfo[] =>
  JSON.parse(execFileSync('bpftool', ['prog', 'show', '--json'], { encoding: 'utf8' })) as ProgramInfo[];

/**
 * In-kernel time of empty programs on the loop's tracepoints per iteration
 * (bpf_stats on meanwhile): bpftrace's, found as the programs that appeared
 * while it ran, with those names and no map (kreplay agents of other tests
 * may load programs of the same names meanwhile; theirs have maps).
 */
async function emptyProgramNs(exe: string, loop: ReadLoop, calls: number): Promise<number> {
  const names = READ_PROGRAMS[loop];
  const before = new Set(programs().map((p) => p.id));
  return underBpftrace(async () => {
    await timeLoop(exe, [loop, String(calls), String(LOOP_CPU)]);
    // the kernel keeps 15 characters of a program's name
    const named = new Set(names.map((n) => n.slice(0, BPF_NAME_CHARS)));
    const empty = programs().filter(
      (p) => !before.has(p.id) && named.has(p.name) && (p.map_ids ?? []).length === 0,
    );
    if (empty.length !== names.length)
      throw new Error(
        `found ${empty.length} of bpftrace's ${names.length} empty programs (${names.join(', ')})`,
      );
    const runs = empty.find((p) => p.name === names[0]!.slice(0, BPF_NAME_CHARS))?.run_cnt ?? 0;
    return empty.reduce((sum, p) => sum + (p.run_time_ns ?? 0), 0) / runs;
  }, emptyPrograms(names));
}

/** In-kernel time of kreplay's programs per loop iteration (bpf_stats on meanwhile). */
async function readProgramCost(
  exe: string,
  calls: number,
  rows: ReadRow[],
  rounds: number,
  log: Logger,
): Promise<void> {
  await withBpfStats(async () => {
    for (let round = 0; round < rounds; round++) {
      for (const row of rows) {
        const loop = row.loop;
        const capture = startCapture({}, () => {}, log);
        try {
          await timeLoop(exe, [loop, String(calls), String(LOOP_CPU)]);
          const names = READ_PROGRAMS[loop];
          const stats = capture.programStats().filter((s) => names.includes(s.name));
          const runs = stats.find((s) => s.name === names[0])?.runCount ?? 0;
          row.programNs.push(stats.reduce((sum, s) => sum + s.runTimeNs, 0) / runs);
          for (const s of stats) (row.perProgram[s.name] ??= []).push(s.runTimeNs / s.runCount);
        } finally {
          await capture.stop();
        }
        row.floorNs.push(await emptyProgramNs(exe, loop, calls));
      }
    }
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export async function runOverheadBench(
  options: { writes?: number; rounds?: number; modes?: OverheadMode[]; reads?: number; log?: Logger } = {},
): Promise<OverheadReport> {
  const modes = options.modes ?? MODES;
  const writes = options.writes ?? 2_000_000;
  const rounds = options.rounds ?? 5;
  const log = options.log ?? createLogger({ level: 'warn', component: 'bench' });
  const exe = benchLoop('writeloop');
  // 0 leaves the read side out (a run of chosen write modes)
  const reads = options.reads ?? (options.modes ? 0 : 500_000);
  const readExe = reads ? benchLoop('readloop') : '';
  const samples = new Map<OverheadMode, number[]>(modes.map((m) => [m, []]));
  const readRows: ReadRow[] = READ_LOOPS.map((loop) => ({
    loop,
    samples: { baseline: [], 'kreplay-agent': [], kreplay: [], bpftrace: [], 'empty-tracepoints': [] },
    programNs: [],
    perProgram: {},
    floorNs: [],
  }));
  const totals = { delivered: 0, dropped: 0 };
  for (let round = 0; round < rounds; round++) {
    for (const mode of modes) {
      samples.get(mode)?.push(await timeMode(mode, exe, writes, log, totals));
    }
    for (const row of reads ? readRows : []) {
      for (const mode of READ_MODES)
        row.samples[mode].push(await timeReadMode(row.loop, mode, readExe, reads, log, totals));
    }
  }
  if (reads) {
    await readProgramCost(readExe, reads, readRows, rounds, log);
  }
  const baseline = median(samples.get('baseline') ?? []);
  const rows = modes.map((mode) => {
    const modeSamples = samples.get(mode) ?? [];
    const nsPerWrite = median(modeSamples);
    return {
      mode,
      nsPerWrite,
      addedNs: nsPerWrite - baseline,
      ratio: nsPerWrite / baseline,
      samples: modeSamples,
    };
  });
  const ns = (mode: OverheadMode): number => rows.find((r) => r.mode === mode)?.nsPerWrite ?? NaN;
  const agentCpu: AgentCpuRow[] = [];
  for (const rate of modes.includes('kreplay-agent') ? AGENT_RATES : []) {
    // about three seconds at a paced rate
    agentCpu.push((await underAgentProcess(exe, rate > 0 ? rate * 3 : writes, rate)).cpu);
  }
  return {
    agentCpu,
    writes,
    rounds,
    rows,
    attributionNs: ns('kreplay') - ns('kreplay-no-attribution'),
    targetsNs: (samples.get('kreplay') ?? []).map(
      (withTargets, round) => withTargets - (samples.get('kreplay-no-targets')?.[round] ?? NaN),
    ),
    reads: reads ? { calls: reads, rows: readRows } : null,
    recordsDelivered: totals.delivered,
    recordsDropped: totals.dropped,
    programNs: modes.includes('kreplay-no-targets')
      ? await targetProgramCost(exe, writes, rounds, log)
      : null,
  };
}

export function formatOverheadReport(report: OverheadReport): string {
  const bpftraceAdded = report.rows.find((r) => r.mode === 'bpftrace')?.addedNs ?? NaN;
  const lines = [
    `write(2) overhead: ${report.writes} writes of 64 bytes to /dev/null, median of ${report.rounds} interleaved rounds`,
    '',
    `${'mode'.padEnd(24)}${'ns/write'.padStart(10)}${'added ns'.padStart(10)}${'x base'.padStart(8)}${'vs bpftrace'.padStart(13)}`,
  ];
  for (const row of report.rows) {
    const vsBpftrace = row.mode === 'baseline' ? '' : (row.addedNs / bpftraceAdded).toFixed(2);
    lines.push(
      `${row.mode.padEnd(24)}${row.nsPerWrite.toFixed(1).padStart(10)}${row.addedNs.toFixed(1).padStart(10)}` +
        `${row.ratio.toFixed(2).padStart(8)}${vsBpftrace.padStart(13)}`,
    );
  }
  const floor = report.rows.find((r) => r.mode === 'empty-tracepoints')?.nsPerWrite ?? NaN;
  const aboveFloor = (mode: OverheadMode): string =>
    ((report.rows.find((r) => r.mode === mode)?.nsPerWrite ?? NaN) - floor).toFixed(1);
  // each line only when the bench ran the modes it compares
  const ran = (mode: OverheadMode) => report.rows.some((r) => r.mode === mode);
  lines.push('');
  if (ran('empty-tracepoints')) {
    lines.push(
      `above the empty-tracepoint floor: kreplay ${aboveFloor('kreplay')} ns, bpftrace ${aboveFloor('bpftrace')} ns`,
    );
    // the same round's runs side by side: the machine's load moves every mode between rounds
    const perRound = (mode: OverheadMode) => report.rows.find((r) => r.mode === mode)?.samples ?? [];
    const floors = perRound('empty-tracepoints');
    for (const mode of [
      'kreplay-excluded',
      'kreplay-excluded-filter-txn',
      'kreplay-agent-excluded',
    ] as const) {
      if (!ran(mode)) continue;
      const ratios = perRound(mode).map((ns, round) => ns / floors[round]!);
      lines.push(`${mode} / empty floor, per round: ${range(ratios, 3)}`);
    }
  }
  if (ran('kreplay-no-attribution'))
    lines.push(`attribution adds ${report.attributionNs.toFixed(1)} ns per write (goal <= 50)`);
  if (ran('kreplay-no-targets'))
    lines.push(
      `write targets add ${median(report.targetsNs).toFixed(1)} ns per write (goal <= 30), ` +
        `per round ${Math.min(...report.targetsNs).toFixed(1)} .. ${Math.max(...report.targetsNs).toFixed(1)}`,
    );
  lines.push(`kreplay records delivered ${report.recordsDelivered}, dropped ${report.recordsDropped}`);
  if (report.programNs) {
    const { on, off, newFileOn, newFileOff } = report.programNs;
    const added = on.map((ns, round) => ns - off[round]!);
    const newFileAdded = newFileOn.map((ns, round) => ns - newFileOff[round]!);
    lines.push(
      '',
      `in-kernel time of the write programs per write (bpf_stats), median (range) of ${on.length} rounds:`,
      `  targets on ${range(on)} ns, off ${range(off)} ns, targets add ${range(added)} ns (goal <= 30)`,
      `  a new file per write (${NEW_FILE_WRITES} writes): on ${range(newFileOn)} ns, off ${range(newFileOff)} ns, ` +
        `targets add ${range(newFileAdded)} ns`,
    );
  }
  if (report.reads) lines.push('', ...formatReadRows(report.reads.calls, report.reads.rows, report.rounds));
  if (report.agentCpu.length > 0)
    lines.push(
      '',
      'kreplay agent process CPU per event (user + system of every thread, /proc/<pid>/stat):',
      `${'writes/s'.padEnd(10)}${'writes'.padStart(10)}${'stored'.padStart(10)}${'dropped'.padStart(10)}${'user us'.padStart(9)}${'sys us'.padStart(8)}${'peak RSS MiB'.padStart(14)}`,
      ...report.agentCpu.map(
        (r) =>
          `${(r.rate > 0 ? String(r.rate) : 'max').padEnd(10)}${String(r.writes).padStart(10)}${String(r.stored).padStart(10)}` +
          `${String(r.dropped).padStart(10)}${r.userUsPerEvent.toFixed(2).padStart(9)}${r.systemUsPerEvent.toFixed(2).padStart(8)}` +
          r.peakRssMiB.toFixed(0).padStart(14),
      ),
    );
  return lines.join('\n');
}

const range = (values: number[], digits = 1) =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)} .. ${Math.max(...values).toFixed(digits)})`;

const READ_LABELS: Record<ReadLoop, string> = {
  file: 'read(2), no context',
  'file-context': 'read(2), in a context',
  socket: 'sendto+recvfrom, binary',
  http: 'sendto+recvfrom, HTTP head',
};

/** Per loop: ns per iteration by mode and kreplay above the floor, by round (the modes run back to back). */
function formatReadRows(calls: number, rows: ReadRow[], rounds: number): string[] {
  const lines = [
    `read side: ${calls} iterations per loop, median (range) of ${rounds} interleaved rounds, ns per iteration`,
    '',
    `${'loop'.padEnd(28)}${'baseline'.padStart(24)}${'kreplay agent'.padStart(24)}${'kreplay (library)'.padStart(24)}${'bpftrace pairing'.padStart(24)}${'empty programs'.padStart(24)}${'agent above floor'.padStart(26)}${'library above floor'.padStart(26)}${'bpftrace above floor'.padStart(26)}${'kreplay programs'.padStart(26)}`,
  ];
  for (const row of rows) {
    const above = (mode: ReadMode) =>
      row.samples[mode].map((ns, i) => ns - row.samples['empty-tracepoints'][i]!);
    lines.push(
      `${READ_LABELS[row.loop].padEnd(28)}${range(row.samples.baseline).padStart(24)}${range(row.samples['kreplay-agent']).padStart(24)}` +
        `${range(row.samples.kreplay).padStart(24)}${range(row.samples.bpftrace).padStart(24)}${range(row.samples['empty-tracepoints']).padStart(24)}` +
        `${range(above('kreplay-agent')).padStart(26)}${range(above('kreplay')).padStart(26)}${range(above('bpftrace')).padStart(26)}${range(row.programNs).padStart(26)}`,
    );
  }
  lines.push(
    '',
    "in-kernel ns per iteration (bpf_stats), median (range): kreplay's programs, the empty programs, kreplay above them",
  );
  for (const row of rows) {
    const above = row.programNs.map((ns, i) => ns - row.floorNs[i]!);
    lines.push(`  ${READ_LABELS[row.loop]}: ${range(row.programNs)}, ${range(row.floorNs)}, ${range(above)}`);
  }
  lines.push('', 'in-kernel ns per run of each program, median (range):');
  for (const row of rows) {
    const each = Object.entries(row.perProgram).map(([name, ns]) => `${name} ${range(ns)}`);
    lines.push(`  ${READ_LABELS[row.loop]}: ${each.join(', ')}`);
  }
  lines.push(
    '',
    'goals (issue 24): a read by a thread without context <= 30 ns above the floor; (issue 14) a recv that is not HTTP <= 100 ns; "kreplay programs" is the',
    "in-kernel time of kreplay's programs on those calls (bpf_stats; it averages over every process's calls)",
  );
  return lines;
}

if (require.main === module) {
  const [writes, rounds] = process.argv.slice(2, 4).map(Number);
  const modes = process.argv[4]?.split(',');
  // a fifth argument: read-side iterations per loop even with chosen modes (0: none)
  const reads = process.argv[5] === undefined ? undefined : Number(process.argv[5]);
  const unknown = modes?.filter((m) => !(MODES as string[]).includes(m));
  if (unknown?.length) {
    console.error(`unknown mode ${unknown.join(', ')}: choose from ${MODES.join(', ')}`);
    process.exit(2);
  }
  runOverheadBench({
    writes: writes || undefined,
    rounds: rounds || undefined,
    modes: modes as OverheadMode[],
    ...(reads === undefined ? {} : { reads }),
  })
    .then((report) => console.log(formatOverheadReport(report)))
    .catch((err: unknown) => {
      console.error(err);
      process.exit(1);
    });
}
