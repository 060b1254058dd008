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

/** The writer's --out file: per label, each write's duration in ns, in order. */
export function writeTimes(outFile: string): Record<string, number[]> {
  const times: Record<string, number[]> = {};
  for (const line of readFileSync(outFile, 'utf8').trim().split('\n')) {
    const [label, ns] = line.split(' ');
    (times[label!] ??= []).push(Number(ns));
  }
  return times;
}

const MS = 1_000_000;

const quantile = (values: number[], q: number) =>
  [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * q)]!;

/**
 * Observed write durations (measured by the build) against intended holds:
 * never early, and late by no more than this machine is late right now. The
 * anchor is the same build's oversleep of plain 2 ms sleeps around its writes
 * (`--anchor N`): at the median within the default tolerance (10% or 1 ms)
 * plus twice the anchor's 90th percentile (the machine's noise comes in
 * bursts the holds may meet), and any call within 10 ms plus twice the
 * anchor's worst (a call may wait for a core, as a sleeping thread does).
 */
export function expectHeld(observedNs: number[], intendedNs: number[], anchorNs: number[]): void {
  const worstWake = Math.max(...anchorNs);
  expectHeldAtMedian(observedNs, intendedNs, anchorNs, 0);
  for (const [k, hold] of intendedNs.entries())
    expect(observedNs[k]! - hold).toBeLessThan(10 * MS + 2 * worstWake);
}

/**
 * expectHeld without its bound on single calls: for a supervisor without
 * real-time priority (an unprivileged run), any one call may wait a scheduler
 * slice on a loaded machine; never early, and late at the median by no more
 * than expectHeld allows, or than `sliceNs` (expectHeld's own test passes 0:
 * a real-time supervisor is not preempted).
 */
export function expectHeldAtMedian(
  observedNs: number[],
  intendedNs: number[],
  anchorNs: number[],
  sliceNs = 2 * MS,
): void {
  expect(anchorNs.length).toBeGreaterThan(0);
  expect(observedNs.length).toBeGreaterThanOrEqual(intendedNs.length);
  const excess = intendedNs.map((hold, k) => {
    const late = observedNs[k]! - hold;
    expect(late).toBeGreaterThanOrEqual(0);
    return late - Math.max(hold * 0.1, 1 * MS);
  });
  expect(quantile(excess, 0.5)).toBeLessThanOrEqual(Math.max(2 * quantile(anchorNs, 0.9), sliceNs));
}
