/** The test build (exec-writer.c), compiled once per test file, and what it recorded. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Writers {
  dynamic: string;
  static: string;
}

/** Compiles the writer (dynamic and static) before the file's tests; removed after. */
export function useWriters(): Writers {
  const writers = { dynamic: '', static: '' };
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kreplay-writer-'));
    const source = join(__dirname, 'exec-writer.c');
    writers.dynamic = join(dir, 'exec-writer');
    writers.static = join(dir, 'exec-writer-static');
    execFileSync('cc', ['-O2', '-pthread', '-o', writers.dynamic, source]);
    execFileSync('cc', ['-O2', '-pthread', '-static', '-o', writers.static, source]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return writers;
}

/**
 * The writer's --out file: per label, each call's duration and start (CLOCK_MONOTONIC), in ns, in
 * order; for the anchor, each sleep's oversleep and when it was due.
 */
export interface WriterRun {
  times: Record<string, number[]>;
  starts: Record<string, number[]>;
}

export function writerRun(outFile: string): WriterRun {
  const run: WriterRun = { times: {}, starts: {} };
  for (const line of readFileSync(outFile, 'utf8').trim().split('\n')) {
    const [label, ns, start] = line.split(' ');
    (run.times[label!] ??= []).push(Number(ns));
    (run.starts[label!] ??= []).push(Number(start));
  }
  return run;
}

/** The writer's --out file: per label, each write's duration in ns, in order. */
export function writeTimes(outFile: string): Record<string, number[]> {
  return writerRun(outFile).times;
}

const MS = 1_000_000;

const quantile = (values: number[], q: number) =>
  [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * q)]!;

/**
 * The k-th call of `label` less the worst wait for a CPU the build's anchor
 * thread saw while that call was in flight (an anchor sleep whose late wake-up
 * overlapped the call): what is left is the call's own time, not the host's.
 */
export function beyondHost(run: WriterRun, label: string, k: number): number {
  const start = run.starts[label]![k]!;
  const end = start + run.times[label]![k]!;
  let worst = 0;
  for (const [i, over] of run.times.anchor!.entries()) {
    const due = run.starts.anchor![i]!;
    if (due < end && due + over > start) worst = Math.max(worst, over);
  }
  return run.times[label]![k]! - worst;
}

const ms = (ns: number) => (ns / MS).toFixed(3);

/**
 * `valueNs` ≤ `boundNs`, or a failure that shows the run: a timing miss in CI
 * is read from its log alone, so it says how late the host was as well.
 */
export function expectWithin(
  what: string,
  valueNs: number,
  boundNs: number,
  run: WriterRun,
  label: string,
): void {
  if (valueNs <= boundNs) return;
  const anchor = run.times.anchor ?? [];
  throw new Error(
    `${label}: ${what} ${ms(valueNs)} ms, bound ${ms(boundNs)} ms; ` +
      `calls (ms) ${run.times[label]!.map(ms).join(' ')}; less the host's wait ` +
      `${run.times[label]!.map((_, k) => ms(beyondHost(run, label, k))).join(' ')}; ` +
      `anchor (${anchor.length} sleeps) p50 ${ms(quantile(anchor, 0.5))} p90 ${ms(quantile(anchor, 0.9))} ` +
      `max ${ms(Math.max(...anchor))} ms`,
  );
}

/**
 * The first calls of `label` (measured by the build) against intended holds:
 * never early, and late by no more than this machine is late right now. The
 * anchor is the same build's oversleep of plain 2 ms sleeps before, during
 * (on a thread of its own) and after its writes (`--anchor N`). Each call is
 * taken less what the anchor waited for a CPU while it was in flight: at the
 * median within the default tolerance (10% or 1 ms) plus twice the anchor's
 * 90th percentile, and any call within 10 ms plus twice the anchor's worst (a
 * call may wait for a core, as a sleeping thread does). Privileged runs pass the
 * build --realtime, so that neither its calls nor its anchor wait behind a
 * loaded host's normal threads.
 */
export function expectHeld(run: WriterRun, label: string, intendedNs: number[]): void {
  const worstWake = Math.max(...run.times.anchor!);
  expectHeldAtMedian(run, label, intendedNs, 0);
  for (const [k, hold] of intendedNs.entries())
    expectWithin(`call ${k} late by`, beyondHost(run, label, k) - hold, 10 * MS + 2 * worstWake, run, label);
}

/**
 * expectHeld without its bound on single calls: for a supervisor without
 * real-time priority (an unprivileged run), any one call may wait a scheduler
 * slice on a loaded machine; never early, and late at the median by no more
 * than expectHeld allows, or than `sliceNs` (expectHeld's own test passes 0:
 * a real-time supervisor is not preempted).
 */
export function expectHeldAtMedian(
  run: WriterRun,
  label: string,
  intendedNs: number[],
  sliceNs = 2 * MS,
): void {
  const anchorNs = run.times.anchor!;
  const observedNs = run.times[label]!;
  expect(anchorNs.length).toBeGreaterThan(0);
  expect(observedNs.length).toBeGreaterThanOrEqual(intendedNs.length);
  const excess = intendedNs.map((hold, k) => {
    expect(observedNs[k]! - hold).toBeGreaterThanOrEqual(0);
    return beyondHost(run, label, k) - hold - Math.max(hold * 0.1, 1 * MS);
  });
  expectWithin(
    'median lateness past the tolerance',
    quantile(excess, 0.5),
    Math.max(2 * quantile(anchorNs, 0.9), sliceNs),
    run,
    label,
  );
}
