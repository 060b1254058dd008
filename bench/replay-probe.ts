/**
 * A client of a replay, in a process of its own (bench/replay-client.ts
 * starts it): it takes the moment each event reaches it, on
 * CLOCK_MONOTONIC, and prints one JSON line of what it saw. Two consumers:
 * `sse` reads the session's Server-Sent Events as the timeline page does
 * (its own connection; on the first `state` event it plays the session);
 * `cli` runs `kreplay replay` and reads the NDJSON it prints on stdout;
 * `anchor` runs bench/timedlines.c the same way (lines written on time by a
 * bare process: what the host allows a client to see).
 * Every event in a chunk read from the socket or pipe gets that chunk's time:
 * what a consumer reading there sees. During the play the probe only copies
 * each chunk into a buffer taken before it and keeps its arrival, and parses
 * them after: an instrument sharing the host's cores with what it measures
 * must take as little of them as it can, and must not stop to collect
 * garbage (the SSE probe still looks in each chunk for a `state` event,
 * which it must see to play and to stop).
 *
 *   node dist/bench/replay-probe.js sse|cli URL TRANSACTION SPEED
 *   node dist/bench/replay-probe.js anchor build/bench/timedlines N GAP_NS [LOOK_NS [relay]]
 */
import { spawn } from 'node:child_process';
import { get } from 'node:http';
import { join } from 'node:path';
import { repoRoot } from '../core/repo-root';
import { Chunks, KeyWatch, Splitter } from './probe-chunks';
import { schedSince, schedStat, type SchedStat } from './thread-schedstat';

export interface ProbeResult {
  /** events seen, in order */
  events: number;
  /** events whose index did not follow the one before (must be 0) */
  outOfOrder: number;
  /** times the stream was cut and resumed */
  cuts: number;
  /** events without emitted_late_ns (read back from the store after a cut) */
  nullLateness: number;
  /** per event: arrival (ns, CLOCK_MONOTONIC) and replay_offset_ns */
  arrivals: number[];
  offsets: number[];
  /** per event: the server's emitted_late_ns (NaN for null) */
  released: number[];
  /** cli: the CLI's main thread from its first event printed to the last reading before it exited (every SCHED_EVERY_MS) */
  reader?: SchedStat;
  /**
   * This probe's main thread, from the first chunk it read to the last: the
   * measuring client is a hop of its own, and one waiting for a core makes
   * events late that the CLI or the daemon delivered on time (issue 48)
   */
  probe?: SchedStat;
}

/** How often the cli probe reads the CLI's main thread's schedstat: its exit takes the last reading's place. */
const SCHED_EVERY_MS = 20;

/** the build whose CLI runs (replay-client.ts passes KREPLAY_BENCH_ROOT on) */
const KREPLAY = join(process.env.KREPLAY_BENCH_ROOT ?? repoRoot(), 'bin', 'kreplay');
const OFFSET = Buffer.from('"replay_offset_ns":');
const LATE = Buffer.from('"emitted_late_ns":');
const ID = Buffer.from('id: ');
const REPLAY = Buffer.from('event: replay\n');
const STATE = Buffer.from('event: state\n');
const FINISHED = Buffer.from('"state":"finished"');
const NEWLINE = 10;
const BLOCK_END = Buffer.from('\n\n');

/**
 * The integer after `key` in `bytes` within [from, to) (NaN for null or
 * absent). The probe reads bytes and decodes nothing: at 100,000 events a
 * second the client that measures must not be the hop that falls behind.
 */
function numberAfter(bytes: Buffer, key: Buffer, from: number, to: number): number {
  const i = bytes.indexOf(key, from);
  if (i < 0 || i >= to) return NaN;
  let j = i + key.length;
  if (bytes[j] === 34) j++; // a quoted number
  let n = 0;
  const start = j;
  for (; j < to; j++) {
    const c = bytes[j]! - 48;
    if (c < 0 || c > 9) break;
    n = n * 10 + c;
  }
  return j === start ? NaN : n;
}

/** Whether `key` occurs in [from, to) of `bytes`. */
function within(bytes: Buffer, key: Buffer, from: number, to: number): boolean {
  const i = bytes.indexOf(key, from);
  return i !== -1 && i + key.length <= to;
}

class Seen implements ProbeResult {
  events = 0;
  outOfOrder = 0;
  cuts = 0;
  nullLateness = 0;
  arrivals: number[] = [];
  offsets: number[] = [];
  released: number[] = [];
  reader?: SchedStat;
  probe?: SchedStat;
  private lastIndex = -1;
  private probeFrom: SchedStat | null = null;

  /** This probe's main thread: read at its first chunk (a cheap read, once) and at the end. */
  chunkRead(): void {
    this.probeFrom ??= schedStat(process.pid);
  }

  done(): void {
    const to = schedStat(process.pid);
    if (this.probeFrom && to) this.probe = schedSince(this.probeFrom, to);
  }

  /** One event's bytes [from, to) of `bytes` (with `index`, when the stream gives it) reached the client at `at`. */
  add(bytes: Buffer, from: number, to: number, at: number, index: number): void {
    this.events++;
    if (index !== this.lastIndex + 1) this.outOfOrder++;
    this.lastIndex = index;
    const late = numberAfter(bytes, LATE, from, to);
    if (Number.isNaN(late)) this.nullLateness++;
    this.arrivals.push(at);
    this.offsets.push(numberAfter(bytes, OFFSET, from, to));
    this.released.push(late);
  }
}

const now = () => Number(process.hrtime.bigint());

/**
 * Runs the probe's parsing over made-up events before it measures, so that
 * the first real events meet compiled code, not the interpreter: the cold
 * start is the client's under test, not the probe's.
 */
function warm(): void {
  const json = '{"event_id":"1","replay_offset_ns":1000,"emitted_late_ns":0}';
  const lines = Buffer.from(`${json}\n`.repeat(64));
  const blocks = Buffer.from(`id: 1\nevent: replay\ndata: ${json}\n\n`.repeat(64));
  const sink = new Seen();
  const byLine = new Splitter(NEWLINE, (bytes, from, to, at) => sink.add(bytes, from, to, at, 0));
  const byBlock = new Splitter(BLOCK_END, (bytes, from, to, at) => {
    if (within(bytes, REPLAY, from, to)) sink.add(bytes, from, to, at, numberAfter(bytes, ID, from, to));
  });
  for (let i = 0; i < 200; i++) {
    byLine.push(lines, now());
    byBlock.push(blocks, now());
  }
}

/**
 * The same for a child's stdout, read as `cli` reads `kreplay replay`'s:
 * its first read would otherwise run Node's stream code for the first time.
 */
function warmPipe(): Promise<void> {
  const script = `for (let i = 0; i < 64; i++) process.stdout.write('{"replay_offset_ns":1}\\n')`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const sink = new Seen();
  const lines = new Splitter(NEWLINE, (bytes, from, to, at) => sink.add(bytes, from, to, at, 0));
  child.stdout.on('data', (chunk: Buffer) => lines.push(chunk, now()));
  return new Promise((resolve) => child.once('close', () => resolve()));
}

async function post(url: string): Promise<unknown> {
  const res = await fetch(url, { method: 'POST' });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${url}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/**
 * Creates a session, follows its stream, plays it on the first state event;
 * resolves when it finishes. A stream cut (the client fell 8 MiB behind)
 * resumes with Last-Event-ID, as the page's client does, and is counted.
 */
async function sse(url: string, transaction: string, speed: number): Promise<ProbeResult> {
  const res = await fetch(`${url}/api/replay/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ transaction_id: transaction, speed_factor: speed }),
  });
  const session = (await res.json()) as { id: string };
  const base = `${url}/api/replay/sessions/${session.id}`;
  const seen = new Seen();
  let lastId: number | null = null;
  let played = false;
  const follow = () =>
    new Promise<boolean>((resolve, reject) => {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (lastId !== null) headers['last-event-id'] = String(lastId);
      const request = get(`${base}/events`, { headers }, (stream) => {
        const kept = new Chunks(
          new Splitter(BLOCK_END, (bytes, from, to, at) => {
            if (within(bytes, REPLAY, from, to)) {
              lastId = numberAfter(bytes, ID, from, to);
              seen.add(bytes, from, to, at, lastId);
            } else if (within(bytes, STATE, from, to)) {
              if (!played) {
                played = true;
                post(`${base}/play`).catch(reject);
              }
              if (within(bytes, FINISHED, from, to)) {
                request.destroy();
                resolve(true);
              }
            }
          }),
        );
        const states = new KeyWatch(STATE);
        stream.on('data', (chunk: Buffer) => {
          kept.keep(chunk, now());
          seen.chunkRead();
          // a state is parsed when it comes (to play, to stop); the replay's frames before it with it
          if (states.seen(chunk)) kept.drain();
        });
        stream.on('end', () => {
          kept.drain();
          resolve(false);
        });
      });
      request.on('error', reject);
    });
  while (!(await follow())) seen.cuts++;
  seen.done();
  return seen;
}

/** `kreplay replay`, its stdout read here. */
function cli(url: string, transaction: string, speed: number): Promise<ProbeResult> {
  // as users run it: bin/kreplay, the pinned Node with the flags the wrapper gives `replay`
  return childLines(KREPLAY, ['replay', transaction, '--speed', String(speed), '--server', url]);
}

/** A child's NDJSON lines on its stdout, read as `cli` reads `kreplay replay`'s (the anchor's: bench/timedlines.c). */
function childLines(command: string, args: string[]): Promise<ProbeResult> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const seen = new Seen();
  let index = 0;
  const kept = new Chunks(
    new Splitter(NEWLINE, (bytes, from, to, at) => {
      if (bytes[from] === 123) seen.add(bytes, from, to, at, index++); // '{'
    }),
  );
  // the reader's time on a CPU and waiting for one while it streams: read at its first chunk, then
  // every SCHED_EVERY_MS (not per chunk: the probe must cost the cores little)
  let first: SchedStat | null = null;
  let last: SchedStat | null = null;
  const sample = () => (last = schedStat(child.pid!) ?? last);
  const sampling = setInterval(sample, SCHED_EVERY_MS);
  child.stdout.on('data', (chunk: Buffer) => {
    kept.keep(chunk, now());
    if (!first) first = sample();
    seen.chunkRead();
  });
  let errText = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (errText += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    // 'close': every chunk of its stdout has been read
    child.once('close', (code) => {
      clearInterval(sampling);
      seen.done();
      kept.drain();
      if (first && last) seen.reader = schedSince(first, last);
      if (code === 0) resolve(seen);
      else reject(new Error(`${command} exited ${code}: ${errText}`));
    });
  });
}

async function main(): Promise<void> {
  const [mode, url, transaction, speed, ...timed] = process.argv.slice(2);
  if ((mode !== 'sse' && mode !== 'cli' && mode !== 'anchor') || !url || !transaction)
    throw new Error(
      'usage: replay-probe.js sse|cli URL TRANSACTION SPEED | anchor TIMEDLINES N GAP_NS [LOOK_NS [relay]]',
    );
  warm();
  if (mode !== 'sse') await warmPipe();
  Chunks.prepare();
  const result =
    mode === 'anchor'
      ? await childLines(url, [transaction, speed ?? '', ...timed])
      : await (mode === 'sse' ? sse : cli)(url, transaction, Number(speed ?? 1));
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
