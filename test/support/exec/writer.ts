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
