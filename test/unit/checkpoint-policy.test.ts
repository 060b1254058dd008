import Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import { EventBatch } from '../../agent/ingest/event-batch';
import { StoreWriter } from '../../agent/store/store-writer';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();
const MiB = 1024 * 1024;

function fill(writer: StoreWriter, batch: EventBatch, start: number): void {
  batch.clear(1_790_000_000_000_000_000n);
  for (let i = 0; i < batch.capacity; i++) {
    batch.pushSysWrite({
      tsOffset: start + i,
      dur: 1000 + (i % 977),
      service: writer.services.id(`s${i % 50}`),
      ctx: 0,
      pid: 1,
      tid: 1,
      comm: writer.comms.id('c'),
      bytes: 64,
      fd: 3,
      ret: 64,
      syscall: 1,
    });
  }
}

describe('checkpoint policy', () => {
  it('keeps the WAL bounded while a reader keeps querying the file', () => {
    const writer = StoreWriter.open(dir.path, 'n', {
      checkpoint: { passiveBytes: 1 * MiB, restartBytes: 4 * MiB, restartWaitMs: 200 },
    });
    const reader = new Database(writer.path, { readonly: true });
    const count = reader.prepare('SELECT count(*) AS n FROM events');
    const batch = new EventBatch(5000);
    let maxWal = 0;
    for (let b = 0; b < 60; b++) {
      fill(writer, batch, b * 5000);
      writer.writeBatch(batch);
      expect((count.get() as { n: number }).n).toBe((b + 1) * 5000);
      maxWal = Math.max(maxWal, statSync(`${writer.path}-wal`).size);
    }
    reader.close();
    writer.close();
    const dbSize = statSync(writer.path).size;
    expect(dbSize).toBeGreaterThan(15 * MiB);
    // one batch is under 1 MiB here: the WAL never holds much more than restartBytes
    expect(maxWal).toBeLessThan(6 * MiB);
    expect(writer.checkpoints.checkpoints).toBeGreaterThan(5);
  });
});
