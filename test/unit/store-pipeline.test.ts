import Database from 'better-sqlite3';
import { StorePipeline } from '../../agent/store/store-pipeline';
import { storePath } from '../../agent/store/store-writer';
import { silentLogger } from '../../core/log/logger';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir();

describe('StorePipeline', () => {
  it('commits batches on its writer thread, which runs these sources (not a build in dist/)', async () => {
    const store = await StorePipeline.open(dir.path, 'n', 8, silentLogger);
    const common = {
      service: store.services.id('api'),
      comm: store.comms.id('node'),
      pid: 1,
      tid: 2,
      ctx: 0,
    };
    store.current.clear(5_000n);
    for (let i = 0; i < 20; i++) {
      if (store.current.full) store.flush();
      store.current.pushSysWrite({ ...common, tsOffset: i, dur: 1, bytes: i, fd: 3, ret: i, syscall: 1 });
    }
    store.drain();
    expect(store.rowsWritten).toBe(20);
    await store.close();
    const db = new Database(storePath(dir.path, 'n'), { readonly: true });
    try {
      expect(db.prepare('SELECT count(*) AS n, sum(bytes) AS total FROM events').get()).toEqual({
        n: 20,
        total: 190,
      });
    } finally {
      db.close();
    }
  });
});
