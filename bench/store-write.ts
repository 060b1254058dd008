/**
 * The store writer's CPU per stored event on request-shaped batches: what the agent's writer thread
 * spends on a followed server's traffic. Each request brings a new context (a fresh traceparent and
 * x-request-id, random as real trace ids are) and four events that carry it (the request's read,
 * a log line's write, the response's write, the next read's EAGAIN), in batches of one flush
 * interval. The writer runs on this thread, so the process's CPU is the writer's, and the bytes it
 * wrote (/proc/self/io's wchar: the WAL's frames and the checkpoints) are the writer's too.
 *
 * A slower server commits fewer requests at a time (a flush interval's worth): the third argument
 * sets the requests a batch (500: a server at 2,500 requests/s), which decides how many index pages
 * each request's rows rewrite.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RecordType } from '../core/model';
import type { ContextEntry, NewNames } from '../agent/ingest/dictionary';
import { EventBatch } from '../agent/ingest/event-batch';
import { StoreWriter } from '../agent/store/store-writer';
import { printTable } from './table';

/* requests per batch: 200 ms (the agent's flush interval) of a server at ~25k requests/s */
export const REQUESTS_PER_BATCH = 5000;
export const EVENTS_PER_REQUEST = 4;

interface Round {
  events: number;
  contexts: number;
  cpuUs: number;
  /** what the writer wrote to files, WAL and checkpoints */
  bytesWritten: number;
  dbMiB: number;
}

function bytesWrittenSoFar(): number {
  return Number(/^wchar: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'))![1]);
}

function hex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

/** Fills `batch` with one batch of requests from `firstCtx` on, appending their contexts. */
export function fillRequests(
  batch: EventBatch,
  contexts: ContextEntry[],
  firstCtx: number,
  request0: number,
  requests = REQUESTS_PER_BATCH,
): void {
  batch.clear(1_790_000_000_000_000_000n);
  for (let r = 0; r < requests; r++) {
    const ctx = firstCtx + r;
    contexts.push([ctx, `bench-${hex(16)}`, hex(16), hex(8), 1]);
    const t = (request0 + r) * 40_000;
    const tid = 100 + (r % 4);
    const common = { service: 1, ctx, pid: 100, tid, comm: 1, dur: 3_000 };
    batch.pushSysWrite({
      ...common,
      type: RecordType.SysRead,
      tsOffset: t,
      bytes: 180,
      fd: 7,
      ret: 180,
      syscall: 0,
      response: 0,
    });
    batch.pushSysWrite({ ...common, tsOffset: t + 9_000, bytes: 40, fd: 3, ret: 40, syscall: 1, target: 1 });
    batch.pushSysWrite({
      ...common,
      tsOffset: t + 15_000,
      bytes: 120,
      fd: 7,
      ret: 120,
      syscall: 1,
      target: 2,
    });
    batch.pushSysWrite({
      ...common,
      type: RecordType.SysRead,
      tsOffset: t + 20_000,
      bytes: 0,
      fd: 7,
      ret: -11,
      syscall: 0,
      response: 11_000,
    });
  }
}

function round(batches: number, requests: number): Round {
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-store-write-'));
  try {
    const writer = StoreWriter.open(dir, 'bench');
    const batch = new EventBatch(requests * EVENTS_PER_REQUEST);
    // every batch says which targets it used, as the agent's do (agent/ingest/dictionary.ts)
    const targets = (b: number): NewNames['targets'] => [
      [1, 1, '/var/log/bench.log', null, BigInt(b)],
      [2, 2, '127.0.0.1:8080', null, BigInt(b)],
    ];
    const first: NewNames = {
      services: [[1, 'bench']],
      comms: [[1, 'server']],
      contexts: [],
      targets: targets(0),
      containers: [],
    };
    let cpuUs = 0;
    let bytesWritten = 0;
    for (let b = 0; b < batches; b++) {
      const names: NewNames =
        b === 0 ? first : { services: [], comms: [], contexts: [], targets: targets(b), containers: [] };
      fillRequests(batch, names.contexts, 1 + b * requests, b * requests, requests);
      const written0 = bytesWrittenSoFar();
      const cpu0 = process.cpuUsage();
      writer.writeBatch(batch, names);
      const cpu = process.cpuUsage(cpu0);
      cpuUs += cpu.user + cpu.system;
      bytesWritten += bytesWrittenSoFar() - written0;
    }
    const events = writer.rowsWritten;
    const dbMiB = writer.dbBytes() / 1048576;
    writer.close();
    return { events, contexts: batches * requests, cpuUs, bytesWritten, dbMiB };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Rounds of `batches` batches of `requests` each, on a fresh store every round. */
export function runStoreWrite(batches: number, rounds: number, requests = REQUESTS_PER_BATCH): Round[] {
  return Array.from({ length: rounds }, () => round(batches, requests));
}

if (require.main === module) {
  const batches = Number(process.argv[2] ?? 60);
  const rounds = Number(process.argv[3] ?? 3);
  const requests = Number(process.argv[4] ?? REQUESTS_PER_BATCH);
  const results = runStoreWrite(batches, rounds, requests);
  printTable(
    `store-write: ${batches} batches of ${requests} requests (${EVENTS_PER_REQUEST} events and 1 new context each)`,
    results.map((r, i) => [
      String(i + 1),
      r.events.toLocaleString('en-US'),
      (r.cpuUs / r.events).toFixed(2),
      (r.cpuUs / r.contexts).toFixed(2),
      (r.bytesWritten / r.events).toFixed(0),
      r.dbMiB.toFixed(0),
    ]),
    ['round', 'events', 'writer µs/event', 'writer µs/request', 'bytes written/event', 'store MiB'],
  );
}
