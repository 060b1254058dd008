/**
 * The shipping loop's own waits (agent/ship/ship-loop.ts) against a recording ClickHouse: a wall
 * clock stepped an hour back or on neither holds a batch for the hour nor ends a stop's flush at once.
 */
import { ClickHouseHttp, type EncodedRows } from '../../core/clickhouse/http-client';
import { CLICKHOUSE_SCHEMA_VERSION } from '../../core/clickhouse/schema';
import { StoreWriter } from '../../agent/store/store-writer';
import { ShipLoop, type ShipLoopOptions, type ShipProgress } from '../../agent/ship/ship-loop';
import { writeEvents } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';
import { HOUR_MS, useWallStep } from '../support/wall-step';

/** Takes every statement at once and tells the schema is current: no server, no migration. */
class RecordingClickHouse extends ClickHouseHttp {
  inserts = 0;
  /** called as each insert arrives, with its number */
  onInsert: (n: number) => void = () => undefined;

  constructor() {
    super({ host: '127.0.0.1', port: 1, database: 'kreplay' });
  }

  override exec(sql: string, rows?: string | Uint8Array | EncodedRows): Promise<string> {
    if (rows !== undefined && sql.startsWith('INSERT')) this.onInsert(++this.inserts);
    return Promise.resolve('');
  }

  override rows<T>(): Promise<T[]> {
    return Promise.resolve([{ v: CLICKHOUSE_SCHEMA_VERSION } as T]);
  }
}

const dir = useTempDir('kreplay-ship-loop-');
const wall = useWallStep();
const BASE = 1_795_345_678_000_000_000n;
let writer: StoreWriter;
let loop: ShipLoop | null = null;

beforeEach(() => {
  writer = StoreWriter.open(dir.path, 'n');
});

afterEach(async () => {
  await loop?.stop();
  loop = null;
  writer.close();
});

function write(from: number, count: number): void {
  writeEvents(
    writer,
    Array.from({ length: count }, (_, i) => ({ ts: BASE + BigInt(from + i) * 1000n })),
  );
}

function startLoop(options: ShipLoopOptions): { progress: ShipProgress; clickhouse: RecordingClickHouse } {
  const clickhouse = new RecordingClickHouse();
  const progress: ShipProgress = { state: 'starting', cursor: 1, shipped: 0, retries: 0, lastError: null };
  loop = new ShipLoop(writer.path, clickhouse, 'test', progress, () => undefined, {
    batchRows: 1000,
    ...options,
  });
  loop.start();
  return { progress, clickhouse };
}

/** Past the microtasks the loop's first look ran on (the recording server answers at once). */
const afterFirstLook = () => new Promise((resolve) => setImmediate(resolve));

describe('shipping loop under a wall clock step', () => {
  it('ships a part batch maxDelayMs after it began to wait, though the clock stepped an hour back meanwhile', async () => {
    write(0, 3);
    const { progress } = startLoop({ maxDelayMs: 50 });
    await afterFirstLook();
    expect(progress.shipped).toBe(0);
    wall.step(-HOUR_MS);
    await waitFor(() => progress.shipped === 3, { what: 'the 3 waiting events shipped' });
  });

  it('flushes what is stored at a stop, though the clock stepped an hour on during the flush', async () => {
    write(0, 5);
    const { progress, clickhouse } = startLoop({ batchRows: 5, maxDelayMs: HOUR_MS });
    await waitFor(() => progress.shipped === 5, { what: 'the first full batch shipped' });
    // written while the loop sleeps, and stopped before it looks: the stop's flush ships these, in two batches
    write(5, 7);
    clickhouse.onInsert = (n) => n === 2 && wall.step(HOUR_MS);
    const stopping = loop!.stop(10_000);
    loop = null;
    await stopping;
    expect(clickhouse.inserts).toBe(3);
    expect(progress).toMatchObject({ state: 'stopped', shipped: 12, cursor: 13 });
  });
});
