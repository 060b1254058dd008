/**
 * In-kernel time of kreplay's read programs per run (bpf_stats) on
 * bench/readloop's file loops, by a thread without a context and by one in a
 * context: the quick figure beside overhead.ts's interleaved wall-clock run.
 *
 *   node dist/bench/read-program-cost.js [reads] [runs]
 */
import { startCapture } from '../agent/capture';
import { silentLogger } from '../core/log/logger';
import { benchLoop, timeLoop } from './bench-loops';
import { withBpfStats } from './bpf-stats';

const PROGRAMS = ['sys_enter_read', 'sys_exit_read'];

async function main(reads: number, runs: number): Promise<void> {
  const exe = benchLoop('readloop');
  await withBpfStats(async () => {
    for (let run = 0; run < runs; run++) {
      for (const loop of ['file', 'file-context']) {
        const capture = startCapture({}, () => {}, silentLogger);
        try {
          const wallNs = await timeLoop(exe, [loop, String(reads), '1']);
          const each = capture
            .programStats()
            .filter((p) => PROGRAMS.includes(p.name))
            .map((p) => `${p.name} ${(p.runTimeNs / p.runCount).toFixed(1)} ns`);
          console.log(`${loop.padEnd(14)} wall ${wallNs.toFixed(1)} ns/read, ${each.join(', ')}`);
        } finally {
          await capture.stop();
        }
      }
    }
  });
}

if (require.main === module) {
  const [reads, runs] = process.argv.slice(2, 4).map(Number);
  main(reads || 300_000, runs || 3).catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
