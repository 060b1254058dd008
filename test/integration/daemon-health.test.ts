/** Health tells the truth: /readyz store by store, damaged stores named, a missing data dir refused. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { StoreWriter } from '../../agent/store/store-writer';
import { damageEventPages, writeEvents, writeStore } from '../support/event-store';
import { runKreplay } from '../support/kreplay-cli';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-health-');
const HOUR_NS = 3_600_000_000_000n;

describe('daemon health', () => {
  let daemon: Daemon | undefined;
  afterEach(async () => {
    await daemon?.close();
    daemon = undefined;
  });
  const start = async () => {
    daemon = await createDaemon({ dataDir: dir.path, log: silentLogger });
    return daemon.url;
  };
  const readyz = async (url: string) => {
    const res = await fetch(`${url}/readyz`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  it('is ready with every store served, and gives each store the age of its newest event', async () => {
    const now = BigInt(Date.now()) * 1_000_000n;
    writeStore(dir.path, 'fresh', [{ ts: now - 2_000_000_000n }]);
    // stored in the order of their stamps, as an agent stores them: the age is the last one's
    writeStore(dir.path, 'stale', [{ ts: now - 2n * HOUR_NS }, { ts: now - HOUR_NS }]);
    const url = await start();
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const { status, body } = await readyz(url);
    expect(status).toBe(200);
    expect(body).toMatchObject({ status: 'ready', data_dir_error: null, skipped: [] });
    const stores = body.stores as { node: string; file: string; newest_event_age_s: number }[];
    expect(stores.map((s) => [s.node, s.file])).toEqual([
      ['fresh', join(dir.path, 'fresh.db')],
      ['stale', join(dir.path, 'stale.db')],
    ]);
    expect(stores[0]!.newest_event_age_s).toBeGreaterThanOrEqual(2);
    expect(stores[0]!.newest_event_age_s).toBeLessThan(60);
    expect(stores[1]!.newest_event_age_s).toBeGreaterThanOrEqual(3600);
    expect(stores[1]!.newest_event_age_s).toBeLessThan(3660);
  });

  it('ages a store by the event it stored last: after the wall clock stepped back, by those stored since the step', async () => {
    const now = BigInt(Date.now()) * 1_000_000n;
    const writer = StoreWriter.open(dir.path, 'stepped');
    // stored before the clock stepped an hour back, then 5 s ago on the stepped clock
    writeEvents(writer, [{ ts: now + HOUR_NS }]);
    writeEvents(writer, [{ ts: now - 5_000_000_000n }]);
    writer.close();
    const { body } = await readyz(await start());
    const [store] = body.stores as { newest_event_age_s: number }[];
    expect(store!.newest_event_age_s).toBeGreaterThanOrEqual(5);
    expect(store!.newest_event_age_s).toBeLessThan(60);
  });

  it('is degraded (503) naming a file it cannot read as a store, and serves the rest', async () => {
    writeStore(dir.path, 'good', [{ ts: 1_795_000_000_000_000_000n, txn: 't' }]);
    writeFileSync(join(dir.path, 'junk.db'), 'this is not SQLite at all, not even close'.repeat(200));
    const url = await start();
    const { status, body } = await readyz(url);
    expect(status).toBe(503);
    expect(body.status).toBe('degraded');
    expect(body.skipped).toEqual([{ file: join(dir.path, 'junk.db'), reason: expect.any(String) }]);
    expect((body.stores as { node: string }[]).map((s) => s.node)).toEqual(['good']);
    const events = await fetch(`${url}/api/events?transaction_id=t`);
    expect(events.status).toBe(200);
  });

  it('names the file when a store turns out damaged mid-read, then skips it and says so', async () => {
    const T0 = 1_795_000_000_000_000_000n;
    writeStore(
      dir.path,
      'broken',
      Array.from({ length: 20_000 }, (_, i) => ({ ts: T0 + BigInt(i) * 1000n, txn: 'big' })),
    );
    writeStore(dir.path, 'intact', [{ ts: T0, txn: 'big' }]);
    const url = await start();
    expect((await readyz(url)).status).toBe(200);
    const path = join(dir.path, 'broken.db');
    damageEventPages(path);
    const res = await fetch(`${url}/api/events?transaction_id=big&limit=10000`);
    expect(res.status).toBe(500);
    const problem = (await res.json()) as Record<string, unknown>;
    expect(problem).toMatchObject({ code: 'E_STORE_DAMAGED' });
    expect(problem.detail).toContain(path);
    expect(problem.detail).toMatch(/damaged/);
    const after = await readyz(url);
    expect(after.status).toBe(503);
    expect(after.body.skipped).toEqual([{ file: path, reason: expect.stringContaining('damaged') }]);
    // the other store is still served
    const rest = (await (await fetch(`${url}/api/events?transaction_id=big`)).json()) as {
      events: unknown[];
    };
    expect(rest.events).toHaveLength(1);
  });

  it('a lookup that found nothing names the store files it skipped (a store copied while written is damaged)', async () => {
    writeStore(dir.path, 'good', [{ ts: 1_795_000_000_000_000_000n, txn: 't' }]);
    const junk = join(dir.path, 'copied.db');
    writeFileSync(junk, 'this is not SQLite at all, not even close'.repeat(200));
    const url = await start();
    const session = await fetch(`${url}/api/replay/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ transaction_id: 'in-the-damaged-store' }),
    });
    expect(session.status).toBe(404);
    const problem = (await session.json()) as { code: string; detail: string };
    expect(problem.code).toBe('E_TRANSACTION_NOT_FOUND');
    expect(problem.detail).toMatch(
      /^no events with transaction_id "in-the-damaged-store"; but 1 store file was skipped, so it may be there: /,
    );
    expect(problem.detail).toContain(junk);
    const event = await fetch(`${url}/api/events/aaaaaaaaaaaa0000000000000001000000000001`);
    expect(event.status).toBe(404);
    expect(((await event.json()) as { detail: string }).detail).toContain(junk);
    const exported = await fetch(`${url}/api/events/export?format=incident&transaction_id=nope`);
    expect(exported.status).toBe(404);
    expect(((await exported.json()) as { detail: string }).detail).toContain(junk);
    // found: nothing to add
    const found = await fetch(`${url}/api/replay/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ transaction_id: 't' }),
    });
    expect(found.status).toBe(201);
  });

  it('refuses to start on a data dir that does not exist', async () => {
    const missing = join(dir.path, 'no-such-dir');
    await expect(createDaemon({ dataDir: missing, log: silentLogger })).rejects.toMatchObject({
      code: 'E_DATA_DIR',
      message: expect.stringContaining(missing),
    });
    const cli = await runKreplay(['daemon', '--data-dir', missing, '--port', '0']);
    expect(cli.status).not.toBe(0);
    expect(cli.stderr).toContain(`--data-dir ${missing} cannot be used`);
  });
});
