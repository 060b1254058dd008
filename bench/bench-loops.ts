/** The C loops the benchmarks time (bench/*.c), built by make into build/bench. */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../core/repo-root';

/** The built loop; a stale or missing binary would time something else, so that is an error. */
export function benchLoop(name: string): string {
  const exe = path.join(repoRoot(), 'build', 'bench', name);
  const source = path.join(repoRoot(), 'bench', `${name}.c`);
  if (!fs.existsSync(exe) || fs.statSync(exe).mtimeMs < fs.statSync(source).mtimeMs)
    throw new Error(`${exe} is missing or older than ${source}: run \`make bench\``);
  return exe;
}

/** Runs a timing loop in a child process; resolves to the ns per call it prints. */
export function timeLoop(exe: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(exe, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve(Number(out)) : reject(new Error(`${path.basename(exe)} exited ${code}`)),
    );
  });
}
