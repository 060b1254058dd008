/**
 * A client of a replay, in a process of its own (bench/replay-client.ts
 * starts it): it takes the moment each event reaches it, on
 * CLOCK_MONOTONIC, and prints one JSON line of what it saw. Two consumers:
 * `sse` reads the session's Server-Sent Events as the timeline page does
 * (its own connection; on the first `state` event it plays the session);
 * `cli` runs `kreplay replay` and reads the NDJSON it prints on stdout.
 * Every event in a chunk read from the socket or pipe gets that chunk's time:
 * what a consumer reading there sees.
 *
 *   node dist/bench/replay-probe.js sse|cli URL TRANSACTION SPEED
 */
import { spawn } from 'node:child_process';
import { get } from 'node:http';
import { join } from 'node:path';
import { repoRoot } from '../core/repo-root';

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
}

/** the build whose CLI runs (replay-client.ts passes KREPLAY_BENCH_ROOT on) */
const KREPLAY = join(process.env.KREPLAY_BENCH_ROOT ?? repoRoot(), 'bin', 'kreplay.js');
const OFFSET = '"replay_offset_ns":';
const LATE = '"emitted_late_ns":';

/** The integer after `key` in `text` from `at` (NaN for null or absent). */
function numberAfter(text: string, key: string, at: number): number {
  const i = text.indexOf(key, at);
  if (i < 0) return NaN;
  let j = i + key.length;
  if (text[j] === '"') j++;
  let n = 0;
  let digits = 0;
  for (; j < text.length; j++, digits++) {
    const c = text.charCodeAt(j) - 48;
    if (c < 0 || c > 9) break;
    n = n * 10 + c;
  }
  return digits === 0 ? NaN : n;
}

class Seen implements ProbeResult {
  events = 0;
  outOfOrder = 0;
  cuts = 0;
  nullLateness = 0;
  arrivals: number[] = [];
  offsets: number[] = [];
  released: number[] = [];
  private lastIndex = -1;

  /** One event's JSON (with `index`, when the stream gives it) reached the client at `at`. */
  add(json: string, at: number, index: number): void {
    this.events++;
    if (index !== this.lastIndex + 1) this.outOfOrder++;
    this.lastIndex = index;
    const late = numberAfter(json, LATE, 0);
    if (Number.isNaN(late)) this.nullLateness++;
    this.arrivals.push(at);
    this.offsets.push(numberAfter(json, OFFSET, 0));
    this.released.push(late);
  }
}

const now = () => Number(process.hrtime.bigint());

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
        let rest = '';
        stream.setEncoding('utf8');
        stream.on('data', (chunk: string) => {
          const at = now();
          const blocks = (rest + chunk).split('\n\n');
          rest = blocks.pop()!;
          for (const block of blocks) {
            if (block.includes('event: replay\n')) {
              lastId = numberAfter(block, 'id: ', 0);
              seen.add(block, at, lastId);
            } else if (block.includes('event: state\n')) {
              if (!played) {
                played = true;
                post(`${base}/play`).catch(reject);
              }
              if (block.includes('"state":"finished"')) {
                request.destroy();
                resolve(true);
              }
            }
          }
        });
        stream.on('end', () => resolve(false));
      });
      request.on('error', reject);
    });
  while (!(await follow())) seen.cuts++;
  return seen;
}

/** `kreplay replay`, its stdout read here. */
function cli(url: string, transaction: string, speed: number): Promise<ProbeResult> {
  const child = spawn(
    process.execPath,
    [KREPLAY, 'replay', transaction, '--speed', String(speed), '--server', url],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const seen = new Seen();
  let rest = '';
  let index = 0;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const at = now();
    const lines = (rest + chunk).split('\n');
    rest = lines.pop()!;
    for (const line of lines) if (line.startsWith('{')) seen.add(line, at, index++);
  });
  let errText = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (errText += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(seen) : reject(new Error(`kreplay replay exited ${code}: ${errText}`)),
    );
  });
}

async function main(): Promise<void> {
  const [mode, url, transaction, speed] = process.argv.slice(2);
  if ((mode !== 'sse' && mode !== 'cli') || !url || !transaction)
    throw new Error('usage: replay-probe.js sse|cli URL TRANSACTION SPEED');
  const result = await (mode === 'sse' ? sse : cli)(url, transaction, Number(speed ?? 1));
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
