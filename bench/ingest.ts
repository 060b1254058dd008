/**
 * Ingest benchmark: the agent's real path from packed kernel records to the
 * node store (decoder, attribution, dictionaries, every index the query API
 * uses), fed as fast as it takes them. Reports sustained rows/s, agent CPU
 * and RSS.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContextResolver } from '../agent/attribution/context-resolver';
import { CgroupPaths } from '../agent/attribution/cgroup-paths';
import { ServiceResolver } from '../agent/attribution/service-resolver';
import { EventBatch } from '../agent/ingest/event-batch';
import { RecordDecoder } from '../agent/ingest/record-decoder';
import { silentLogger } from '../agent/log/logger';
import { StoreWriter } from '../agent/store/store-writer';
import { buildSyntheticStream } from './synthetic-records';
import { printTable } from './table';

export interface IngestResult {
  events: number;
  seconds: number;
  rowsPerSecond: number;
  cpuPercent: number;
  rssMiB: number;
  dbMiB: number;
}

export function runIngest(events: number, batchRows = 65536): IngestResult {
  const stream = buildSyntheticStream(events);
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-ingest-'));
  try {
    const writer = StoreWriter.open(dir, 'bench');
    const decoder = new RecordDecoder(
      writer,
      new ServiceResolver([], new CgroupPaths(null)),
      new ContextResolver(silentLogger),
      () => 1_790_000_000_000_000_000n,
    );
    const batch = new EventBatch(batchRows);
    const flush = () => {
      writer.writeBatch(batch);
      batch.clear();
    };
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (const buf of stream.batches) {
      decoder.decode(buf, batch, flush);
      if (batch.full) flush();
    }
    flush();
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    const result = {
      events,
      seconds,
      rowsPerSecond: writer.rowsWritten / seconds,
      cpuPercent: ((cpu.user + cpu.system) / 1e6 / seconds) * 100,
      rssMiB: process.memoryUsage().rss / 1048576,
      dbMiB: writer.dbBytes() / 1048576,
    };
    if (writer.rowsWritten !== events) throw new Error(`stored ${writer.rowsWritten} of ${events} events`);
    writer.close();
    return result;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  const events = Number(process.env.KREPLAY_BENCH_EVENTS ?? 3_000_000);
  const r = runIngest(events);
  printTable('ingest: packed kernel records -> node store, all query indexes', [
    ['events', r.events.toLocaleString('en-US')],
    ['seconds', r.seconds.toFixed(2)],
    ['rows/s sustained', Math.round(r.rowsPerSecond).toLocaleString('en-US')],
    ['agent CPU (one thread = 100%)', `${r.cpuPercent.toFixed(0)}%`],
    ['agent RSS', `${r.rssMiB.toFixed(0)} MiB`],
    ['store size', `${r.dbMiB.toFixed(0)} MiB`],
  ]);
}
