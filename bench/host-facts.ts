/**
 * The host a bench's figures were taken on, measured as the bench starts: the CPU's model and what
 * one system call costs there, a 64-byte write(2) to /dev/null (bench/writeloop.c, unpinned, the
 * median of 3 runs). Every figure of the agent's cost and a replay's timing moves with the kernel's
 * entry and exit, and those move with the CPU under the VM and its mitigations, not only with the
 * kernel: the same Linux 6.18 paid 203–209 ns for this write on 2026-11-27 and 305–335 ns a day
 * later, and the servers' own CPU a request doubled with it. Figures of different days are compared
 * at this calibration, never as they are.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../core/repo-root';
import { median } from './server-load';

export interface HostFacts {
  cpuModel: string;
  cpus: number;
  kernel: string;
  node: string;
  /** ns a 64-byte write to /dev/null, the median of WRITE_RUNS runs; null when not measured */
  writeNs: number | null;
  /** why writeNs is null */
  writeNsMissing?: string;
  /** 1, 5 and 15 minutes, as the bench starts */
  loadavg: number[];
}

const WRITES = 200_000;
const WRITE_RUNS = 3;

const WRITE_LOOP = join(repoRoot(), 'build', 'bench', 'writeloop');

/** ns a write costs here by `loop`, or why it could not be measured (writeloop is built by `make bench`). */
export function writeCost(loop = WRITE_LOOP): { writeNs: number | null; writeNsMissing?: string } {
  if (!existsSync(loop))
    return { writeNs: null, writeNsMissing: `${loop} is not built (make bench builds it)` };
  try {
    const runs = Array.from({ length: WRITE_RUNS }, () =>
      Number(execFileSync(loop, [String(WRITES), '-1'], { encoding: 'utf8' }).trim()),
    );
    if (runs.some((ns) => !Number.isFinite(ns))) throw new Error(`it printed ${runs.join(', ')}`);
    return { writeNs: median(runs) };
  } catch (err) {
    return { writeNs: null, writeNsMissing: `${loop} failed: ${(err as Error).message}` };
  }
}

export function hostFacts(): HostFacts {
  return {
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    cpus: os.availableParallelism(),
    kernel: os.release(),
    node: process.version,
    ...writeCost(),
    loadavg: os.loadavg(),
  };
}

/** One line for a bench's output. */
export function describeHost(host: HostFacts): string {
  const write =
    host.writeNs === null
      ? `write not measured: ${host.writeNsMissing}`
      : `a 64-byte write to /dev/null ${host.writeNs.toFixed(0)} ns`;
  return `host: ${host.cpuModel}, ${host.cpus} CPUs, Linux ${host.kernel}, ${write}, load ${host.loadavg[0]!.toFixed(2)}`;
}
