/**
 * What `kreplay replay` spends per event between its socket and stdout,
 * without the socket (issue 48): a dense replay's stream (100,001 frames
 * shaped as the daemon sends them) in reads of 64 KiB (a client running
 * behind) and of 1.5 KiB (one that keeps up: ~13 events a look), each read's
 * events made into the bytes of its one stdout write as cli/session-replay.ts
 * does (ReplayLines). CPU (user + system) and minor page faults per event,
 * in one process, so the figures hold at any load. KREPLAY_BENCH_ROOT names
 * another build measured in the same rounds, alternately: its
 * dist/cli/replay-lines.js, or, for a build before it, its SseByteParser's
 * messages joined as its CLI did.
 *
 *   node dist/bench/replay-stream-parse.js [rounds]
 */
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { ReplayLines } from '../cli/replay-lines';
import type { SseByteParser } from '../cli/sse-client';
import { printTable } from './table';

const EVENTS = 100_001;
const READS = [64 << 10, 1536];
const NEWLINE = Buffer.from('\n');

/** A build's way from a read to the bytes it prints. */
type Printer = () => (read: Buffer) => Buffer;

/** This build's: the CLI's ReplayLines. */
function linesPrinter(Lines: new () => Pick<ReplayLines, 'push'>): Printer {
  return () => {
    const lines = new Lines();
    return (read) => lines.push(read).lines;
  };
}

/** A build before ReplayLines: its parser's messages, each replay's data and a newline joined. */
function messagesPrinter(Parser: new () => Pick<SseByteParser, 'push'>): Printer {
  return () => {
    const parser = new Parser();
    return (read) => {
      const lines: Buffer[] = [];
      for (const message of parser.push(read))
        if (message.event === 'replay') lines.push(message.data, NEWLINE);
      return Buffer.concat(lines);
    };
  };
}

/** The stream, and the bytes printed from it (each frame's data and a newline). */
function stream(): { whole: Buffer; printed: number } {
  const frames: string[] = [];
  let printed = 0;
  for (let i = 0; i < EVENTS; i++) {
    const data =
      `{"event_id":"${i}","transaction_id":"dense","replay_offset_ns":${i * 10_000},` +
      `"emitted_late_ns":${i % 50_000},"kind":"write","pid":1234,"fd":7,"bytes":512,"summary":"GET /item/${i} 200"}`;
    frames.push(`id: ${i}\nevent: replay\ndata: ${data}\n\n`);
    printed += data.length + 1;
  }
  return { whole: Buffer.from(frames.join('')), printed };
}

/** CPU µs and page faults per event for one pass over `whole` in reads of `size` (fresh buffers, as a socket's). */
function pass(
  printer: Printer,
  { whole, printed }: ReturnType<typeof stream>,
  size: number,
): { us: number; faults: number } {
  const reads: Buffer[] = [];
  for (let at = 0; at < whole.length; at += size) reads.push(Buffer.from(whole.subarray(at, at + size)));
  const print = printer();
  const cpu = process.cpuUsage();
  const faults = process.resourceUsage().minorPageFault;
  let bytes = 0;
  for (const read of reads) bytes += print(read).length;
  const used = process.cpuUsage(cpu);
  if (bytes !== printed) throw new Error(`printed ${bytes} bytes of ${printed}`);
  return {
    us: (used.user + used.system) / EVENTS,
    faults: (process.resourceUsage().minorPageFault - faults) / EVENTS,
  };
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 5);
  const builds: [string, Printer][] = [['this build', linesPrinter(ReplayLines)]];
  const other = process.env.KREPLAY_BENCH_ROOT;
  if (other) {
    const lines = join(other, 'dist', 'cli', 'replay-lines.js');
    const printer = existsSync(lines)
      ? linesPrinter(((await import(lines)) as { ReplayLines: typeof ReplayLines }).ReplayLines)
      : messagesPrinter(
          ((await import(join(other, 'dist', 'cli', 'sse-client.js'))) as typeof import('../cli/sse-client'))
            .SseByteParser,
        );
    builds.unshift([other, printer]);
  }
  const data = stream();
  const seen = new Map<string, { us: number[]; faults: number[] }>();
  for (let round = 0; round < rounds; round++)
    for (const size of READS)
      for (const [name, printer] of builds) {
        const key = `${name}\t${size}`;
        const r = pass(printer, data, size);
        const into = seen.get(key) ?? { us: [], faults: [] };
        into.us.push(r.us);
        into.faults.push(r.faults);
        seen.set(key, into);
      }
  const range = (xs: number[], digits: number) =>
    `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;
  printTable(
    `replay-stream-parse: the CLI's parse and print, ${EVENTS} events, ${rounds} rounds (the first cold)`,
    [...seen].map(([key, r]) => {
      const [name, size] = key.split('\t');
      return [name!, size!, range(r.us.slice(1), 2), r.us[0]!.toFixed(2), range(r.faults, 3)];
    }),
    ['build', 'read bytes', 'µs/event, rounds 2–', 'µs/event, round 1', 'faults/event'],
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
