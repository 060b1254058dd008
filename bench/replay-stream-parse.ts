/**
 * What `kreplay replay` spends per event between its socket and stdout,
 * without the socket (issue 48): a dense replay's stream (100,001 frames
 * shaped as the daemon sends them) in reads of 64 KiB (a client running
 * behind) and of 1.5 KiB (one that keeps up: ~13 events a look), parsed
 * with the CLI's SseByteParser and each read's events joined for its one
 * stdout write, as cli/session-replay.ts does. CPU (user + system) and
 * minor page faults per event, in one process, so the figures hold at any
 * load. KREPLAY_BENCH_ROOT names another build (its dist/cli/sse-client.js)
 * measured in the same rounds, alternately.
 *
 *   node dist/bench/replay-stream-parse.js [rounds]
 */
import { join } from 'node:path';
import { SseByteParser } from '../cli/sse-client';
import { printTable } from './table';

const EVENTS = 100_001;
const READS = [64 << 10, 1536];
const NEWLINE = Buffer.from('\n');

type Parser = new () => Pick<SseByteParser, 'push'>;

function stream(): Buffer {
  const frames: string[] = [];
  for (let i = 0; i < EVENTS; i++)
    frames.push(
      `id: ${i}\nevent: replay\ndata: {"event_id":"${i}","transaction_id":"dense","replay_offset_ns":${i * 10_000},` +
        `"emitted_late_ns":${i % 50_000},"kind":"write","pid":1234,"fd":7,"bytes":512,"summary":"GET /item/${i} 200"}\n\n`,
    );
  return Buffer.from(frames.join(''));
}

/** CPU µs and page faults per event for one pass over `whole` in reads of `size` (fresh buffers, as a socket's). */
function pass(Parser: Parser, whole: Buffer, size: number): { us: number; faults: number } {
  const reads: Buffer[] = [];
  for (let at = 0; at < whole.length; at += size) reads.push(Buffer.from(whole.subarray(at, at + size)));
  const parser = new Parser();
  const cpu = process.cpuUsage();
  const faults = process.resourceUsage().minorPageFault;
  let events = 0;
  for (const read of reads) {
    const lines: Buffer[] = [];
    for (const message of parser.push(read))
      if (message.event === 'replay') {
        lines.push(message.data, NEWLINE);
        events++;
      }
    Buffer.concat(lines);
  }
  const used = process.cpuUsage(cpu);
  if (events !== EVENTS) throw new Error(`parsed ${events} events of ${EVENTS}`);
  return {
    us: (used.user + used.system) / EVENTS,
    faults: (process.resourceUsage().minorPageFault - faults) / EVENTS,
  };
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 5);
  const builds: [string, Parser][] = [['this build', SseByteParser]];
  const other = process.env.KREPLAY_BENCH_ROOT;
  if (other) {
    const module = (await import(join(other, 'dist', 'cli', 'sse-client.js'))) as { SseByteParser: Parser };
    builds.unshift([other, module.SseByteParser]);
  }
  const whole = stream();
  const seen = new Map<string, { us: number[]; faults: number[] }>();
  for (let round = 0; round < rounds; round++)
    for (const size of READS)
      for (const [name, Parser] of builds) {
        const key = `${name}\t${size}`;
        const r = pass(Parser, whole, size);
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
