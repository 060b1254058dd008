/**
 * Ingest benchmark: the agent's real path from packed kernel records to the
 * node store (decoder, attribution, dictionaries, every index the query API
 * uses), fed as fast as it takes them. Reports sustained rows/s, agent CPU
 * and RSS, for the agent's pipeline (decode here, SQLite on the writer
 * thread) and, in the same run, for both on one thread.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CgroupPaths } from '../agent/attribution/cgroup-paths';
import { ContextResolver } from '../agent/attribution/context-resolver';
import { ServiceResolver } from '../agent/attribution/service-resolver';
import { EventBatch } from '../agent/ingest/event-batch';
import { RecordDecoder, type BatchSink } from '../agent/ingest/record-decoder';
import { silentLogger } from '../core/log/logger';
import type { Dictionaries } from '../agent/ingest/dictionary';
import { AGENT_BATCH_ROWS, StorePipeline } from '../agent/store/store-pipeline';
import { WRITER_CACHE_KIB } from '../core/store/schema';
import { StoreWriter } from '../agent/store/store-writer';
import { buildSyntheticStream, type SyntheticStream } from './synthetic-records';
import { printTable } from './table';

export interface IngestResult {
  mode: string;
  events: number;
  seconds: number;
  rowsPerSecond: number;
  cpuPercent: number;
  rssMiB: number;
  dbMiB: number;
}

interface Target {
  sink: BatchSink;
  dictionaries: Dictionaries;
  finish(): Promise<{ rows: number; dbBytes: number }>;
}

/* the agent's sizes unless the environment names others (to measure what each costs) */
const BATCH_ROWS = Number(process.env.KREPLAY_BENCH_BATCH_ROWS ?? AGENT_BATCH_ROWS);
const CACHE_KIB = Number(process.env.KREPLAY_BENCH_CACHE_MB ?? WRITER_CACHE_KIB / 1024) * 1024;

async function measure(
  mode: string,
  stream: SyntheticStream,
  open: (dir: string) => Promise<Target>,
): Promise<IngestResult> {
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-ingest-'));
  try {
    const target = await open(dir);
    const decoder = new RecordDecoder(
      target.dictionaries,
      new ServiceResolver([], new CgroupPaths(null)),
      new ContextResolver(silentLogger),
      () => 1_790_000_000_000_000_000n,
    );
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (const buf of stream.batches) decoder.decode(buf, target.sink);
    const { rows, dbBytes } = await target.finish();
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    if (rows !== stream.events) throw new Error(`${mode}: stored ${rows} of ${stream.events} events`);
    return {
      mode,
      events: stream.events,
      seconds,
      rowsPerSecond: rows / seconds,
      cpuPercent: ((cpu.user + cpu.system) / 1e6 / seconds) * 100,
      rssMiB: process.memoryUsage().rss / 1048576,
      dbMiB: dbBytes / 1048576,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const pipelined = async (dir: string): Promise<Target> => {
  const store = await StorePipeline.open(
    dir,
    'bench',
    BATCH_ROWS,
    { onCorrupt: 'refuse', cacheKib: CACHE_KIB },
    silentLogger,
  );
  return {
    sink: store,
    dictionaries: store,
    finish: async () => {
      store.drain();
      const result = { rows: store.rowsWritten, dbBytes: store.dbBytes() };
      await store.close();
      return result;
    },
  };
};

const oneThread = async (dir: string): Promise<Target> => {
  const writer = StoreWriter.open(dir, 'bench', { cacheKib: CACHE_KIB });
  const sink = {
    current: new EventBatch(BATCH_ROWS),
    flush() {
      writer.writeBatch(this.current);
      this.current.clear();
    },
  };
  return {
    sink,
    dictionaries: writer,
    finish: async () => {
      sink.flush();
      const result = { rows: writer.rowsWritten, dbBytes: writer.dbBytes() };
      writer.close();
      return result;
    },
  };
};

export async function runIngest(events: number): Promise<IngestResult[]> {
  const stream = buildSyntheticStream(events);
  return [
    await measure('pipeline (agent)', stream, pipelined),
    await measure('one thread', stream, oneThread),
  ];
}

export function printIngest(results: IngestResult[]): void {
  printTable(
    `ingest: ${results[0]!.events.toLocaleString('en-US')} packed kernel records -> node store with every query index`,
    results.map((r) => [
      r.mode,
      Math.round(r.rowsPerSecond).toLocaleString('en-US'),
      r.seconds.toFixed(2),
      `${r.cpuPercent.toFixed(0)}%`,
      r.rssMiB.toFixed(0),
      r.dbMiB.toFixed(0),
    ]),
    ['mode', 'rows/s', 'seconds', 'CPU (1 core = 100%)', 'RSS MiB', 'store MiB'],
  );
  const [pipe, single] = results;
  console.log(`pipeline / one thread: ${(pipe!.rowsPerSecond / single!.rowsPerSecond).toFixed(2)}x`);
}

if (require.main === module) {
  void runIngest(Number(process.env.KREPLAY_BENCH_EVENTS ?? 3_000_000)).then(printIngest);
}
