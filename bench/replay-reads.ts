/**
 * What replay's reads of the store cost the daemon (issue 25): the real
 * `kreplay daemon` process over a node file holding a 1,000,000-event
 * transaction (and, with KREPLAY_BENCH_REPLAY_READS_CH=1, a 50,000-event
 * one, or KREPLAY_BENCH_REPLAY_READS_CH_EVENTS, shipped to a ClickHouse
 * server on this machine, read with --store).
 * Each round creates sessions and seeks them to the middle, timing each
 * request, while this process asks /healthz back to back (the anchor:
 * /healthz asked the same way for as long with nothing else going on, just
 * after); then it plays sessions to their first event on a stream, timed
 * from the POST that created them. KREPLAY_BENCH_ROOT runs another
 * checkout's build (the bench, its data and its timing stay this one's), so
 * two builds are compared on the same data in the same hour.
 *
 *   node dist/bench/replay-reads.js [events] [rounds]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoreWriter } from '../agent/store/store-writer';
import { openEventStream } from '../cli/sse-client';
import { shipDataDir, TestClickHouse } from './clickhouse-servers';
import { startDaemonProcess } from './daemon-process';
import { quantile, writeEvenTransaction } from './replay-data';
import { printTable } from './table';

const OPS_PER_ROUND = 5;
const RECORDED_NS = 10_000_000_000;
const log = (msg: string) => process.stderr.write(`[bench:replay-reads] ${msg}\n`);

function writeData(dir: string, events: number): void {
  const writer = StoreWriter.open(dir, 'n1');
  writeEvenTransaction(writer, 'big', events, RECORDED_NS);
  writer.close();
}

const ms = (from: bigint) => Number(process.hrtime.bigint() - from) / 1e6;

/** /healthz latencies (ms), asked back to back until `until` settles. */
async function healthz(url: string, until: Promise<unknown>): Promise<number[]> {
  let done = false;
  void until.finally(() => (done = true));
  const out: number[] = [];
  while (!done) {
    const t = process.hrtime.bigint();
    const res = await fetch(`${url}/healthz`);
    await res.arrayBuffer();
    out.push(ms(t));
  }
  return out;
}

async function request(url: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${url}/api/replay/sessions${path}`, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

interface Round {
  create: number[];
  seek: number[];
  /** from POST create to the first event on the session's stream */
  firstEvent: number[];
  health: number[];
  anchor: number[];
}

/** Creates and seeks (no play) with /healthz asked meanwhile, then plays sessions to their first event. */
async function round(url: string): Promise<Round> {
  const create: number[] = [];
  const seek: number[] = [];
  const firstEvent: number[] = [];
  const reads = (async () => {
    for (let i = 0; i < OPS_PER_ROUND; i++) {
      const t = process.hrtime.bigint();
      const session = (await request(url, 'POST', '', { transaction_id: 'big' })) as {
        id: string;
        duration_ns: number;
      };
      create.push(ms(t));
      const s = process.hrtime.bigint();
      await request(url, 'POST', `/${session.id}/seek`, { position_ns: Math.floor(session.duration_ns / 2) });
      seek.push(ms(s));
      await request(url, 'DELETE', `/${session.id}`);
    }
  })();
  const started = process.hrtime.bigint();
  const health = await healthz(url, reads);
  await reads;
  const took = ms(started);
  const anchor = await healthz(url, new Promise((resolve) => setTimeout(resolve, took)));
  for (let i = 0; i < OPS_PER_ROUND; i++) {
    const t = process.hrtime.bigint();
    const session = (await request(url, 'POST', '', { transaction_id: 'big' })) as { id: string };
    const stream = await openEventStream(`${url}/api/replay/sessions/${session.id}/events`);
    const first = (async () => {
      for await (const message of stream.messages) if (message.event === 'replay') return;
    })();
    await request(url, 'POST', `/${session.id}/play`);
    await first;
    firstEvent.push(ms(t));
    stream.close();
    await request(url, 'DELETE', `/${session.id}`);
  }
  return { create, seek, firstEvent, health, anchor };
}

function rows(label: string, rounds: Round[]): string[][] {
  const f = (v: number) => v.toFixed(1);
  return rounds.map((r, i) => [
    label,
    String(i + 1),
    `${f(quantile(r.create, 0.5))} / ${f(Math.max(...r.create))}`,
    `${f(quantile(r.firstEvent, 0.5))} / ${f(Math.max(...r.firstEvent))}`,
    `${f(quantile(r.seek, 0.5))} / ${f(Math.max(...r.seek))}`,
    `${f(quantile(r.health, 0.99))} / ${f(Math.max(...r.health))}`,
    `${f(quantile(r.anchor, 0.99))} / ${f(Math.max(...r.anchor))}`,
  ]);
}

async function bench(label: string, dir: string, flags: string[], rounds: number): Promise<string[][]> {
  const root = process.env.KREPLAY_BENCH_ROOT;
  const daemon = await startDaemonProcess(
    ['--data-dir', dir, ...flags],
    join(dir, `daemon-${label}.log`),
    root,
  );
  try {
    const out: Round[] = [];
    for (let i = 0; i < rounds; i++) out.push(await round(daemon.url));
    return rows(label, out);
  } finally {
    await daemon.stop();
  }
}

async function main(): Promise<void> {
  const events = Number(process.argv[2] ?? 1_000_000);
  const rounds = Number(process.argv[3] ?? 3);
  const header = [
    'store',
    'round',
    'create p50 / max',
    'create → first event p50 / max',
    'seek p50 / max',
    '/healthz p99 / max during create and seek',
    '/healthz p99 / max (anchor)',
  ];
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-bench-reads-'));
  try {
    log(`writing ${events} events of one transaction to ${dir}`);
    writeData(dir, events);
    const table = await bench(`node files, ${events}`, dir, [], rounds);
    if (process.env.KREPLAY_BENCH_REPLAY_READS_CH === '1') {
      const chDir = mkdtempSync(join(tmpdir(), 'kreplay-bench-reads-ch-'));
      const server = await TestClickHouse.create();
      try {
        const chEvents = Number(process.env.KREPLAY_BENCH_REPLAY_READS_CH_EVENTS ?? 50_000);
        writeData(chDir, chEvents);
        await server.start();
        await shipDataDir(chDir, server.client('reads'));
        const store = `clickhouse://127.0.0.1:${server.httpPort}/reads`;
        table.push(...(await bench(`ClickHouse, ${chEvents}`, chDir, ['--store', store], rounds)));
      } finally {
        await server.destroy();
        rmSync(chDir, { recursive: true, force: true });
      }
    }
    printTable(`replay reads (ms; ${OPS_PER_ROUND} sessions a round)`, table, header);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
