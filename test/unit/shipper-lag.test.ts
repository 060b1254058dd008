/** The shipper's lag in seconds (agent/ship/shipper.ts) under a wall clock step, with no thread started and no server. */
import { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { StoreWriter } from '../../agent/store/store-writer';
import { Shipper } from '../../agent/ship/shipper';
import { writeEvents } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-shipper-lag-');
const SECOND_NS = 1_000_000_000n;
const HOUR_NS = 3600n * SECOND_NS;
const T = 1_795_345_678_000_000_000n;

describe('shipper lag', () => {
  it('counts the first waiting event’s wait on, whichever way the wall clock steps while it waits', async () => {
    const writer = StoreWriter.open(dir.path, 'n');
    writeEvents(writer, [{ ts: T }, { ts: T + 1000n }, { ts: T + 2000n }]);
    writer.close();
    let wallNs = T + 2n * SECOND_NS;
    const clickhouse = new ClickHouseHttp({ host: '127.0.0.1', port: 1, database: 'kreplay' });
    const shipper = new Shipper(`${dir.path}/n.db`, clickhouse, { nowNs: () => wallNs });
    try {
      const before = shipper.status();
      expect(before.lagEvents).toBe(3);
      expect(before.lagSeconds).toBeGreaterThanOrEqual(2);
      wallNs = T - HOUR_NS;
      const back = shipper.status();
      expect(back.lagSeconds).toBeGreaterThanOrEqual(before.lagSeconds);
      expect(back.lagSeconds).toBeLessThan(60);
      wallNs = T + 2n * HOUR_NS;
      const on = shipper.status();
      expect(on.lagSeconds).toBeGreaterThanOrEqual(back.lagSeconds);
      expect(on.lagSeconds).toBeLessThan(60);
    } finally {
      await shipper.stop();
    }
  });
});
