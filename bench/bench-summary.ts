/**
 * The machine-readable summary of one bench run (bench/out/<name>-<time>.json, gitignored): which
 * bench, its arguments and KREPLAY_BENCH_* settings, the commit it ran at, when, how it ended, the
 * tables it printed (bench/table.ts hands each over through KREPLAY_BENCH_TABLES) and its output.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../core/repo-root';
import { BENCHES, type BenchName } from './benches';
import type { HostFacts } from './host-facts';

export interface PrintedTable {
  title: string;
  header?: string[];
  rows: (string | number)[][];
}

export interface RunStart {
  bench: BenchName;
  args: string[];
  startedAt: Date;
  /** the host as the bench started */
  host: HostFacts;
  /** where the bench's tables are appended, one JSON line each */
  tablesFile: string;
}

/** The commit of the checkout the bench runs from, `-dirty` when tracked files changed. */
function commit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], {
      cwd: repoRoot(),
      encoding: 'utf8',
    }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: repoRoot(),
      encoding: 'utf8',
    });
    return dirty.trim() ? `${head}-dirty` : head;
  } catch {
    return 'unknown';
  }
}

export function runSummary(bench: BenchName, args: string[], host: HostFacts): RunStart {
  const startedAt = new Date();
  const tablesFile = join(os.tmpdir(), `kreplay-bench-${process.pid}-${bench}-${startedAt.getTime()}.ndjson`);
  return { bench, args, startedAt, host, tablesFile };
}

/** Writes the summary and returns its path (from the repository's root). */
export function writeSummary(
  start: RunStart,
  result: { code: number | null; signal: string | null; output: string },
): string {
  const finishedAt = new Date();
  const tables: PrintedTable[] = existsSync(start.tablesFile)
    ? readFileSync(start.tablesFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as PrintedTable)
    : [];
  rmSync(start.tablesFile, { force: true });
  const summary = {
    bench: start.bench,
    topic: BENCHES[start.bench].topic,
    args: start.args,
    env: Object.fromEntries(Object.entries(process.env).filter(([key]) => key.startsWith('KREPLAY_BENCH_'))),
    command: `make bench BENCH=${start.bench}${start.args.length > 0 ? ` BENCH_ARGS='${start.args.join(' ')}'` : ''}`,
    commit: commit(),
    startedAt: start.startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    seconds: (finishedAt.getTime() - start.startedAt.getTime()) / 1000,
    exit: { code: result.code, signal: result.signal },
    host: start.host,
    loadavgAtEnd: os.loadavg(),
    tables,
    output: result.output.split('\n'),
  };
  const dir = join('bench', 'out');
  mkdirSync(join(repoRoot(), dir), { recursive: true });
  const file = join(dir, `${start.bench}-${start.startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(join(repoRoot(), file), `${JSON.stringify(summary, null, 2)}\n`);
  return file;
}
