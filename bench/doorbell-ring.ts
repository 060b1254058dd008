/**
 * What a ring of the replay clock's doorbell costs the daemon's main thread (issue 48): the addon's
 * poll of the pipe (DoorbellWatch, as daemon/replay/clock/release-reader.ts hears it) against a
 * net.Socket on the same kind of pipe (how it heard it before), in one process. A worker thread
 * rings as the clock thread does (a byte on a non-blocking pipe), once the main thread has heard
 * the last ring and some 200 µs later, so each ring is a wake-up of its own; the main thread's CPU
 * (process.threadCpuUsage) over the rings, divided by them. Rounds alternate the two.
 *
 *   node dist/bench/doorbell-ring.js [rounds=3] [rings=5000]
 */
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import { Worker } from 'node:worker_threads';
import { nativeAddon } from '../core/native/addon';
import { quantile } from './replay-data';
import { printTable } from './table';

const GAP_MS = 0.2;
const log = (msg: string) => process.stderr.write(`[bench:doorbell-ring] ${msg}\n`);

/** The ringing thread: waits until ring i was heard, then GAP_MS, then rings. */
const RINGER = `
const { workerData: { fd, heard, rings, gapMs } } = require('node:worker_threads');
const { writeSync } = require('node:fs');
const byte = new Uint8Array(1);
for (let i = 0; i < rings; i++) {
  while (Atomics.load(heard, 0) !== i) Atomics.wait(heard, 0, Atomics.load(heard, 0), 1);
  Atomics.wait(heard, 1, 0, gapMs);
  writeSync(fd, byte);
}`;

type Mode = 'addon' | 'socket';

/** µs of the main thread a ring, user and system. */
function round(mode: Mode, rings: number): Promise<{ total: number; user: number }> {
  const [readFd, writeFd] = nativeAddon().doorbellPipe();
  const heard = new Int32Array(new SharedArrayBuffer(8));
  const ringer = new Worker(RINGER, { eval: true, workerData: { fd: writeFd, heard, rings, gapMs: GAP_MS } });
  return new Promise((resolve, reject) => {
    let seen = 0;
    let from: NodeJS.CpuUsage | undefined;
    let stop: () => void = () => undefined;
    const ring = () => {
      // the first ring's wake-up starts the count: the thread and the pipe are set up by then
      if (seen === 0) from = process.threadCpuUsage();
      seen++;
      Atomics.store(heard, 0, seen);
      Atomics.notify(heard, 0);
      if (seen < rings) return;
      const used = process.threadCpuUsage(from);
      stop();
      // the write end is closed once its ringer is gone; stop() closed the read end
      void ringer.terminate().then(() => {
        closeSync(writeFd);
        resolve({ total: (used.user + used.system) / (rings - 1), user: used.user / (rings - 1) });
      });
    };
    if (mode === 'socket') {
      const socket = new Socket({ fd: readFd, readable: true, writable: false });
      socket.on('data', ring).on('error', reject);
      stop = () => socket.destroy();
    } else {
      const watch = new (nativeAddon().DoorbellWatch)(readFd, (error) => (error ? reject(error) : ring()));
      watch.ref();
      stop = () => watch.close();
    }
    ringer.on('error', reject);
  });
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 3);
  const rings = Number(process.argv[3] ?? 5000);
  const results: Record<Mode, { total: number; user: number }[]> = { addon: [], socket: [] };
  for (let r = 0; r < rounds; r++) {
    // socket, addon, addon, socket, ...: neither always runs first
    const order: Mode[] = r % 2 === 0 ? ['socket', 'addon'] : ['addon', 'socket'];
    for (const mode of order) {
      const result = await round(mode, rings);
      results[mode].push(result);
      log(`round ${r + 1}/${rounds} ${mode}: ${result.total.toFixed(1)} µs a ring`);
    }
  }
  const range = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return `${sorted[0]!.toFixed(1)}–${sorted.at(-1)!.toFixed(1)} (${quantile(sorted, 0.5).toFixed(1)})`;
  };
  printTable(
    `doorbell-ring: ${rounds} rounds of ${rings} rings, one every ~${GAP_MS * 1000} µs after the last was heard; µs of the main thread a ring, range (median)`,
    (['socket', 'addon'] as const).map((mode) => [
      mode === 'addon' ? 'DoorbellWatch (the addon polls the pipe)' : 'net.Socket on the pipe (before)',
      range(results[mode].map((x) => x.total)),
      range(results[mode].map((x) => x.user)),
    ]),
    ['how the main thread hears it', 'CPU', 'of it in user space'],
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
