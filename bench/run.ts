/**
 * Every benchmark, one after another, each in a process of its own (so one
 * bench's heap and threads do not disturb the next), each printing its table.
 *
 *   node dist/bench/run.js [overhead|ingest|retention|query|replay|replay-dense|replay-reads|replay-client|daemon-load|exec|exec-relay|exec-cause|timeline|fleet|incident|incident-start ...]
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const BENCHES = [
  'overhead',
  'ingest',
  'retention',
  'query',
  'replay',
  'replay-dense',
  'replay-reads',
  'replay-client',
  'daemon-load',
  'exec',
  'exec-relay',
  'exec-cause',
  'timeline',
  'fleet',
  'incident',
  'incident-start',
  'otlp',
] as const;

function selected(args: string[]): string[] {
  const unknown = args.filter((name) => !(BENCHES as readonly string[]).includes(name));
  if (unknown.length > 0) {
    console.error(`unknown benchmark ${unknown.join(', ')}: choose from ${BENCHES.join(', ')}`);
    process.exit(2);
  }
  return args.length > 0 ? args : [...BENCHES];
}

let failed = 0;
for (const name of selected(process.argv.slice(2))) {
  console.log(`\n## ${name}\n`);
  const result = spawnSync(process.execPath, [join(__dirname, `${name}.js`)], { stdio: 'inherit' });
  if (result.status !== 0) {
    console.error(`bench ${name} failed (${result.signal ?? `exit ${result.status}`})`);
    failed++;
  }
}
process.exit(failed > 0 ? 1 : 0);
