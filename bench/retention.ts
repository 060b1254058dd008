/**
 * Retention benchmark: the agent's ingest path (decoder, attribution,
 * dictionaries, every index) into a store held at a size cap, against the
 * same stream without a cap, in interleaved rounds. Reports the ingest rate
 * with pruning as a ratio to without, and the store's file size (file and
 * WAL, measured after every batch) against the cap. Two ways to keep the file
 * under the cap are compared on one thread: free pages reused by the next
 * inserts (auto_vacuum NONE, what the agent does) and free pages returned to
 * the filesystem (auto_vacuum INCREMENTAL, incremental_vacuum after each
 * pruning run).
 */
import { storeFileBytes } from '../core/store/store-bytes';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CgroupPaths } from '../agent/attribution/cgroup-paths';
import { ContextResolver } from '../agent/attribution/context-resolver';
import { ServiceResolver } from '../agent/attribution/service-resolver';
import { EventBatch } from '../agent/ingest/event-batch';
import { RecordDecoder, type BatchSink } from '../agent/ingest/record-decoder';
import type { Dictionaries } from '../agent/ingest/dictionary';
import type { RetentionOptions } from '../agent/store/retention';
import { AGENT_BATCH_ROWS, StorePipeline } from '../agent/store/store-pipeline';
import { StoreWriter, storePath } from '../agent/store/store-writer';
import { silentLogger } from '../core/log/logger';
import { buildSyntheticStream, type SyntheticStream } from './synthetic-records';
import { printTable } from './table';

/* the agent's batch size, so that the pipeline here is the agent's */
const BATCH_ROWS = AGENT_BATCH_ROWS;
const MiB = 1024 * 1024;

interface Target {
  sink: BatchSink;
  dictionaries: Dictionaries;
  finish(): Promise<number>;
}

interface Round {
  mode: string;
  rowsPerSecond: number;
  peakMiB: number;
  finalMiB: number;
}

const capped = (bytes: number): RetentionOptions => ({
  retainNs: 0,
  retainContextNs: 0,
  maxStore: { bytes },
});

function pipeline(retention?: RetentionOptions) {
  return async (dir: string, sample: () => void): Promise<Target> => {
    const store = await StorePipeline.open(
      dir,
      'bench',
      BATCH_ROWS,
      { onCorrupt: 'refuse', retention },
      silentLogger,
    );
    const sink: BatchSink = {
      get current() {
        return store.current;
      },
      flush() {
        store.flush();
        sample();
      },
    };
    return {
      sink,
      dictionaries: store,
      finish: async () => {
        store.drain();
        sample();
        const rows = store.rowsWritten;
        await store.close();
        return rows;
      },
    };
  };
}

function oneThread(retention: RetentionOptions, returnPages: boolean) {
  return async (dir: string, sample: () => void): Promise<Target> => {
    if (returnPages) {
      // auto_vacuum must be chosen before the first table exists
      const db = new Database(storePath(dir, 'bench'));
      db.pragma('auto_vacuum = INCREMENTAL');
      db.close();
    }
    const writer = StoreWriter.open(dir, 'bench', { retention });
    const sink = {
      current: new EventBatch(BATCH_ROWS),
      flush() {
        const rows = this.current.count;
        writer.writeBatch(this.current);
        this.current.clear();
        writer.prune(rows);
        if (returnPages) writer.db.pragma('incremental_vacuum');
        sample();
      },
    };
    return {
      sink,
      dictionaries: writer,
      finish: async () => {
        sink.flush();
        const rows = writer.rowsWritten;
        writer.close();
        return rows;
      },
    };
  };
}

async function measure(
  mode: string,
  stream: SyntheticStream,
  open: (dir: string, sample: () => void) => Promise<Target>,
): Promise<Round> {
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-retention-'));
  try {
    const path = storePath(dir, 'bench');
    let peak = 0;
    const target = await open(dir, () => (peak = Math.max(peak, storeFileBytes(path))));
    const decoder = new RecordDecoder(
      target.dictionaries,
      new ServiceResolver([], new CgroupPaths(null)),
      new ContextResolver(silentLogger),
      () => 1_790_000_000_000_000_000n,
    );
    const t0 = process.hrtime.bigint();
    for (const buf of stream.batches) decoder.decode(buf, target.sink);
    const rows = await target.finish();
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    if (rows !== stream.events) throw new Error(`${mode}: ingested ${rows} of ${stream.events} events`);
    return { mode, rowsPerSecond: rows / seconds, peakMiB: peak / MiB, finalMiB: storeFileBytes(path) / MiB };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function runRetention(events: number, rounds: number, capMiB: number) {
  const stream = buildSyntheticStream(events);
  const cap = capMiB * MiB;
  const modes: [string, (dir: string, sample: () => void) => Promise<Target>][] = [
    ['agent pipeline, no cap', pipeline()],
    [`agent pipeline, cap ${capMiB} MiB (reuse, auto_vacuum NONE)`, pipeline(capped(cap))],
    [`one thread, cap ${capMiB} MiB, reuse (auto_vacuum NONE)`, oneThread(capped(cap), false)],
    [`one thread, cap ${capMiB} MiB, return (auto_vacuum INCREMENTAL)`, oneThread(capped(cap), true)],
  ];
  const results = new Map<string, Round[]>(modes.map(([mode]) => [mode, []]));
  for (let r = 0; r < rounds; r++)
    for (const [mode, open] of modes) results.get(mode)!.push(await measure(mode, stream, open));
  return { events, capMiB, results };
}

function range(values: number[], digits: number): string {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  return lo === hi ? lo.toFixed(digits) : `${lo.toFixed(digits)}–${hi.toFixed(digits)}`;
}

export function printRetention({ events, capMiB, results }: Awaited<ReturnType<typeof runRetention>>): void {
  const base = results.values().next().value!;
  printTable(
    `retention: ${events.toLocaleString('en-US')} packed kernel records, cap ${capMiB} MiB, ${base.length} interleaved rounds (ranges)`,
    [...results].map(([mode, rounds]) => [
      mode,
      range(
        rounds.map((r) => r.rowsPerSecond / 1000),
        0,
      ),
      range(
        rounds.map((r, i) => r.rowsPerSecond / base[i]!.rowsPerSecond),
        2,
      ),
      range(
        rounds.map((r) => r.peakMiB),
        1,
      ),
      range(
        rounds.map((r) => r.finalMiB),
        1,
      ),
    ]),
    ['mode', 'k rows/s', '× no cap (same round)', 'peak file+WAL MiB', 'final MiB'],
  );
}

if (require.main === module) {
  void runRetention(
    Number(process.env.KREPLAY_BENCH_EVENTS ?? 2_000_000),
    Number(process.env.KREPLAY_BENCH_ROUNDS ?? 2),
    Number(process.env.KREPLAY_BENCH_CAP_MIB ?? 48),
  ).then(printRetention);
}
