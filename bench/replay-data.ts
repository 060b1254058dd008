/**
 * What the replay benches share: one transaction written evenly over a
 * span, the small transactions the daemon is asked for meanwhile and the
 * poller that asks, and a quantile.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { EventBatch } from '../agent/ingest/event-batch';
import type { StoreWriter } from '../agent/store/store-writer';
import type { PollResult } from './replay-poller';

const CHUNK = 50_000;

/** `events` writes of 64 B under one context, spread evenly over `spanNs` from a fixed start. */
export function writeEvenTransaction(
  writer: StoreWriter,
  context: string,
  events: number,
  spanNs: number,
): void {
  const comm = writer.comms.id('worker');
  const service = writer.services.id('svc');
  const ctx = writer.contexts.id(context, null);
  for (let from = 0; from < events; from += CHUNK) {
    const batch = new EventBatch(CHUNK);
    batch.clear(1_795_000_000_000_000_000n);
    for (let i = from; i < Math.min(events, from + CHUNK); i++)
      batch.pushSysWrite({
        tsOffset: Math.floor((i * spanNs) / events),
        dur: 1000,
        service,
        ctx,
        pid: 1,
        tid: 1,
        comm,
        bytes: 64,
        fd: 3,
        ret: 64,
        syscall: 1,
      });
    writer.writeBatch(batch);
  }
}

/** The q-quantile of `values` (NaN for none), nearest rank below. */
export const quantile = (values: number[], q: number): number =>
  values.length === 0 ? NaN : [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) * q)]!;

/** Transactions `lookup-0` .. `lookup-{LOOKUPS-1}`, 10 events each, after the replayed ones: what a poll asks for. */
export const LOOKUPS = 100;

export function writeLookupTransactions(writer: StoreWriter): void {
  const comm = writer.comms.id('worker');
  const service = writer.services.id('svc');
  const batch = new EventBatch(LOOKUPS * 10);
  batch.clear(1_795_000_100_000_000_000n);
  for (let i = 0; i < LOOKUPS * 10; i++)
    batch.pushSysWrite({
      tsOffset: i * 1000,
      dur: 1000,
      service,
      ctx: writer.contexts.id(`lookup-${i % LOOKUPS}`, null),
      pid: 2,
      tid: 2,
      comm,
      bytes: 8,
      fd: 3,
      ret: 8,
      syscall: 1,
    });
  writer.writeBatch(batch);
}

/** A GET read to its end; a status other than 2xx fails it (the query load's requests, untimed). */
export async function getOk(url: string): Promise<void> {
  const res = await fetch(url);
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
}

/**
 * Latencies (ms) of /healthz and of an event page (a lookup), asked in turn
 * every `everyMs` until `until` settles, by bench/replay-poller.ts in a
 * process of its own: the bench's own collections must not count in the
 * daemon's answers, nor take a core from the play.
 */
export async function pollDaemon(url: string, until: Promise<unknown>, everyMs: number): Promise<PollResult> {
  const child = spawn(
    process.execPath,
    [join(__dirname, 'replay-poller.js'), url, String(everyMs), String(LOOKUPS)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  await until.catch(() => {});
  child.stdin.end();
  const code = await exited;
  if (code !== 0) throw new Error(`replay-poller exited ${code}`);
  return JSON.parse(out) as PollResult;
}
