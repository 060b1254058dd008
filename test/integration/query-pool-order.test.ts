/**
 * The order the query pool hands work to a busy worker: the reads a
 * replay's schedule waits for (frames read ahead) before the queued
 * queries, a resuming stream's history pages in line with the queries,
 * behind those queued before them. One worker that answers each request
 * with its op's name: the answers come in the order the pool gave them out.
 */
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { QueryPool } from '../../daemon/queries/query-pool';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-query-order-');
const RANGE = { transactionId: 't', fromNs: 0n, toNs: 1n };

describe('query pool order', () => {
  it('takes read-ahead before queued queries, and a history page after the queries queued before it', async () => {
    const pool = new QueryPool({
      dataDir: dir.path,
      log: silentLogger,
      workers: 1,
      workerModule: { dir: join(__dirname, '..', 'support'), name: 'echo-query-worker' },
    });
    try {
      await pool.ready();
      const answered: string[] = [];
      const note = (what: string, call: Promise<unknown>) => call.then(() => answered.push(what));
      // the first is on the worker at once; the rest queue behind it in the same turn
      await Promise.all([
        note('query 1', pool.reader.nodes()),
        note('query 2', pool.reader.get('e2')),
        note('history page', pool.transactions.history!(RANGE, 10, undefined, {} as never)),
        note('read-ahead', pool.transactions.frames!(RANGE, 10, undefined, {} as never, {} as never)),
        note('query 3', pool.reader.nodes()),
      ]);
      expect(answered).toEqual(['query 1', 'read-ahead', 'query 2', 'history page', 'query 3']);
    } finally {
      await pool.close();
    }
  });
});
