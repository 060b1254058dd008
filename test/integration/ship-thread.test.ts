/**
 * The shipper's thread failing outside its loop's retries (here: it cannot
 * open the node file it was given) is reported as the loop reports a failed
 * batch, and started again from the cursor after the longest backoff; stop()
 * ends it whatever it is doing. No ClickHouse is needed: the thread fails
 * before it sends anything.
 */
import { renameSync } from 'node:fs';
import { join } from 'node:path';
import { StoreWriter } from '../../agent/store/store-writer';
import { Shipper } from '../../agent/ship/shipper';
import { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

describe('the ship thread', () => {
  const dir = useTempDir();

  it('reports a thread that cannot start as retrying, tries again, and stops', async () => {
    StoreWriter.open(dir.path, 'gone').close();
    const path = join(dir.path, 'gone.db');
    // port 1: nothing is ever sent, the thread fails first
    const ch = new ClickHouseHttp({ host: '127.0.0.1', port: 1, database: 'x' });
    const shipper = new Shipper(path, ch, { retryMaxMs: 50 });
    // this side has the file open; the thread, started now, finds nothing at the path
    renameSync(path, join(dir.path, 'moved.db'));
    shipper.start();
    await waitFor(() => shipper.status(false).retries >= 2, { what: 'two failed starts', timeoutMs: 30_000 });
    const status = shipper.status(false);
    expect(status.state).toBe('retrying');
    expect(status.lastError).toMatch(/open|exist/i);
    expect(status.shipped).toBe(0);
    await shipper.stop();
    expect(shipper.status(false).state).toBe('stopped');
  });
});
