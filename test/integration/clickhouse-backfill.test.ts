/**
 * `kreplay ship --from NODE.db --to clickhouse://…` as a user runs it: a
 * node file backfilled into a real clickhouse-server, the process killed
 * (SIGKILL) halfway and run again: every event there once as readers see
 * it (at most one batch stored twice until merges), the file's cursor at its
 * end, a third run with nothing to do; and clear errors for bad input.
 */
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { StoreWriter } from '../../agent/store/store-writer';
import { clickhouseAvailable, useClickHouse } from '../support/clickhouse-server';
import { KREPLAY_BIN } from '../support/agent-process';
import { writeEvents, type TestEvent } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';
import { incidentEvents } from '../support/incident-events';
import { IncidentWriter } from '../../core/incident';
import type { RedactKind } from '../../core/incident/incident-types';

const describeCh = clickhouseAvailable ? describe : describe.skip;
if (!clickhouseAvailable)
  console.warn('SKIPPED: clickhouse-server is not installed (make setup installs it)');

const BASE = 1_763_856_000_000_000_000n;
const EVENTS = 60_000;
const BATCH = 2000;

function events(from: number, count: number): TestEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    ts: BASE + BigInt(from + i) * 1000n,
    txn: `tx-${(from + i) % 97}`,
    service: `svc-${(from + i) % 5}`,
  }));
}

function cursor(path: string): number | null {
  const db = new Database(path, { readonly: true });
  try {
    const row = db.prepare('SELECT next_seq FROM ship_cursors').get() as { next_seq: number } | undefined;
    return row?.next_seq ?? null;
  } finally {
    db.close();
  }
}

function ship(...args: string[]): { status: number | null; stderr: string } {
  const out = spawnSync(process.execPath, [KREPLAY_BIN, 'ship', ...args], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { status: out.status, stderr: out.stderr };
}

describeCh('kreplay ship --from (backfill)', () => {
  jest.setTimeout(120_000);
  const dir = useTempDir();
  const clickhouse = useClickHouse();

  it('backfills a node file, resumes after a kill without duplicates, and has nothing to do after', async () => {
    const path = join(dir.path, 'host-a.db');
    const writer = StoreWriter.open(dir.path, 'host-a');
    for (let i = 0; i < EVENTS; i += 10_000) writeEvents(writer, events(i, 10_000));
    writer.close();
    const ch = clickhouse.server.client('backfill');
    const url = `clickhouse://127.0.0.1:${clickhouse.server.httpPort}/backfill`;

    // killed while it ships: between two batches or in one, whichever the kill meets
    const first = spawn(
      process.execPath,
      [KREPLAY_BIN, 'ship', '--from', path, '--to', url, '--batch-rows', String(BATCH)],
      {
        stdio: 'ignore',
      },
    );
    const deadline = Date.now() + 60_000;
    while ((cursor(path) ?? 1) < EVENTS / 3) {
      if (Date.now() > deadline || first.exitCode !== null)
        throw new Error('the first run never got a third in');
      await new Promise((r) => setTimeout(r, 10));
    }
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const killedAt = cursor(path)!;
    expect(killedAt).toBeLessThan(EVENTS + 1);
    const [partial] = await ch.rows<{ n: string }>('SELECT count() AS n FROM events FINAL');
    expect(Number(partial!.n)).toBeGreaterThanOrEqual(killedAt - 1);

    const second = ship('--from', path, '--to', url, '--batch-rows', String(BATCH));
    expect(second.stderr).toMatch(
      new RegExp(`shipped ${EVENTS - (killedAt - 1)} events \\(${killedAt - 1} were there before\\)`),
    );
    expect(second.status).toBe(0);
    expect(cursor(path)).toBe(EVENTS + 1);
    const [all] = await ch.rows<{ n: string; ids: string; raw: string; tx: string }>(
      `SELECT (SELECT count() FROM events FINAL) AS n, (SELECT uniqExact(event_id) FROM events) AS ids,
         (SELECT count() FROM events) AS raw,
         (SELECT count() FROM events_by_transaction FINAL WHERE transaction_id = 'tx-7') AS tx`,
    );
    expect({ n: all!.n, ids: all!.ids, tx: all!.tx }).toEqual({
      n: String(EVENTS),
      ids: String(EVENTS),
      tx: String(Math.ceil((EVENTS - 7) / 97)),
    });
    // the one batch the kill may have met is stored twice until a merge collapses it
    expect(Number(all!.raw)).toBeLessThanOrEqual(EVENTS + BATCH);

    const third = ship('--from', path, '--to', url);
    expect(third.status).toBe(0);
    expect(third.stderr).toMatch(new RegExp(`shipped 0 events \\(${EVENTS} were there before\\)`));
  });

  it('backfills an incident file, again without duplicates, and refuses a redacted one', async () => {
    const events = incidentEvents(300, 'txn-incident');
    const write = (name: string, redact: RedactKind[]) => {
      const writer = new IncidentWriter({ transactionId: 'txn-incident', source: 'node-stores', redact });
      for (const event of events) writer.add(event);
      const path = join(dir.path, name);
      writeFileSync(path, writer.finish(null));
      return path;
    };
    const path = write('incident.kri', []);
    const url = `clickhouse://127.0.0.1:${clickhouse.server.httpPort}/incident`;
    const ch = clickhouse.server.client('incident');
    for (const round of [1, 2]) {
      const run = ship('--from', path, '--to', url, '--batch-rows', '128');
      expect(run.stderr).toMatch(/shipped 300 events of transaction txn-incident/);
      expect(run.status).toBe(0);
      const rows = await ch.rows<Record<string, unknown>>('SELECT * FROM events FINAL ORDER BY event_id');
      expect(rows).toHaveLength(300);
      if (round === 2) continue;
      // every field as the file holds it
      for (const event of events) {
        const row = rows.find((r) => r.event_id === event.event_id)!;
        for (const [field, value] of Object.entries(event))
          expect([field, row[field] === null ? null : String(row[field])]).toEqual([
            field,
            value === null ? null : String(value),
          ]);
      }
    }
    const redacted = ship('--from', write('redacted.kri', ['paths']), '--to', url);
    expect(redacted.status).toBe(1);
    expect(redacted.stderr).toMatch(
      /redacted\.kri is redacted \(paths\): its events keep the ids of the real ones/,
    );
  });

  it('names what is wrong: no such file, not a node file, a bad URL, a server that is not there', () => {
    const url = `clickhouse://127.0.0.1:${clickhouse.server.httpPort}/backfill`;
    const missing = ship('--from', join(dir.path, 'nope.db'), '--to', url);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/nope\.db does not exist/);

    const other = join(dir.path, 'other.db');
    new Database(other).exec('CREATE TABLE t (x)').close();
    const notNode = ship('--from', other, '--to', url);
    expect(notNode.status).toBe(1);
    expect(notNode.stderr).toMatch(/other\.db has schema version 0, not a kreplay store/);
    const text = join(dir.path, 'notes.txt');
    writeFileSync(text, 'not a node file, not an incident');
    const neither = ship('--from', text, '--to', url);
    expect(neither.status).toBe(1);
    expect(neither.stderr).toMatch(/notes\.txt/);

    const writer = StoreWriter.open(dir.path, 'host-b');
    writeEvents(writer, events(0, 10));
    writer.close();
    const node = join(dir.path, 'host-b.db');
    const badUrl = ship('--from', node, '--to', 'http://127.0.0.1/x');
    expect(badUrl.status).toBe(1);
    expect(badUrl.stderr).toMatch(/expected clickhouse:\/\/HOST:PORT\/DB/);

    const down = ship('--from', node, '--to', 'clickhouse://127.0.0.1:1/x', '--give-up-after', '2');
    expect(down.status).toBe(1);
    expect(down.stderr).toMatch(
      /gave up after 2 failed tries in a row: ClickHouse at 127\.0\.0\.1:1 unreachable/,
    );
    expect(down.stderr).toMatch(/stopped with 10 events to go \(0 shipped\)/);
    expect(cursor(node)).toBeNull();
  });
});
