/**
 * The benchmarks registered in bench/benches.ts, one after another, each in a process of its own
 * (so one bench's heap and threads do not disturb the next), each printing its tables; every run
 * also leaves a machine-readable summary, bench/out/<name>-<time>.json (bench-summary.ts).
 *
 *   node dist/bench/run.js [NAME ...] [-- ARG ...]     (make bench BENCH='NAME ...' BENCH_ARGS='ARG ...')
 *
 * No name runs them all; arguments go to one named benchmark (its usage: bench/benches.ts).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '../core/repo-root';
import { BENCHES, isBenchName, type Bench, type BenchName } from './benches';
import { runSummary, writeSummary } from './bench-summary';
import { describeHost, hostFacts } from './host-facts';

interface Selection {
  names: BenchName[];
  args: string[];
}

/** The names and arguments asked for, or the reason they cannot be run. */
export function selection(argv: string[]): Selection | { error: string } {
  const dashes = argv.indexOf('--');
  const asked = dashes < 0 ? argv : argv.slice(0, dashes);
  const args = dashes < 0 ? [] : argv.slice(dashes + 1);
  const unknown = asked.filter((name) => !isBenchName(name));
  if (unknown.length > 0)
    return {
      error: `unknown benchmark ${unknown.join(', ')}: choose from ${Object.keys(BENCHES).join(', ')}`,
    };
  const names = asked.length > 0 ? (asked as BenchName[]) : (Object.keys(BENCHES) as BenchName[]);
  if (args.length > 0 && names.length !== 1)
    return { error: `arguments (${args.join(' ')}) go to one benchmark; ${names.length} are named` };
  return { names, args };
}

/** One bench in its own process, its output passed through and kept. */
function runOne(
  name: BenchName,
  args: string[],
  tables: string,
): Promise<{ code: number | null; signal: string | null; output: string }> {
  return new Promise((resolve, reject) => {
    const bench: Bench = BENCHES[name];
    const [command, file] = bench.script
      ? ['bash', join(repoRoot(), 'bench', `${name}.sh`)]
      : [process.execPath, join(__dirname, `${name}.js`)];
    const child = spawn(command, [file, ...args], {
      cwd: repoRoot(),
      stdio: ['inherit', 'pipe', 'inherit'],
      env: { ...process.env, KREPLAY_BENCH_TABLES: tables },
    });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      process.stdout.write(chunk);
    });
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolve({ code, signal, output: Buffer.concat(chunks).toString('utf8') }),
    );
  });
}

async function main(): Promise<number> {
  const chosen = selection(process.argv.slice(2));
  if ('error' in chosen) {
    console.error(chosen.error);
    return 2;
  }
  let failed = 0;
  for (const name of chosen.names) {
    console.log(`\n## ${name}\n`);
    const host = hostFacts();
    console.log(`${describeHost(host)}\n`);
    const summary = runSummary(name, chosen.args, host);
    const result = await runOne(name, chosen.args, summary.tablesFile);
    const file = writeSummary(summary, result);
    console.log(`\n(summary: ${file})`);
    if (result.code !== 0) {
      console.error(`bench ${name} failed (${result.signal ?? `exit ${result.code}`})`);
      failed++;
    }
  }
  return failed > 0 ? 1 : 0;
}

if (require.main === module)
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
