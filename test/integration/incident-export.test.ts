import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeIncident, readIncidentFile } from '../../core/incident';
import type { ApiEvent } from '../../core/model';
import { StoreWriter } from '../../agent/store/store-writer';
import { writeEvents, writeStore, type TestEvent } from '../support/event-store';
import {
  fetchAllPages,
  get,
  getBytes,
  startEventsServer,
  useEventsBackends,
  type EventsServer,
} from '../support/events-http';
import { runKreplay } from '../support/kreplay-cli';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-incident-export-');
const BACKENDS = useEventsBackends();
const BASE = 1795345678123456789n;
const at = (i: number) => BASE + BigInt(i * 10_000);

const TARGETS: [kind: 'file' | 'socket', value: string][] = [
  ['file', '/var/lib/app/db.sqlite'],
  ['file', '/var/lib/app/db.sqlite-wal'],
  ['socket', 'tcp 10.1.2.3:5432'],
];

/** alpha: a run with counters around the transaction; beta: events only (a store with no run overlapping). */
function writeAlpha(): void {
  const writer = StoreWriter.open(dir.path, 'alpha');
  try {
    writer.beginRun({
      node: 'alpha',
      startedNs: BASE - 1_000_000n,
      kernel: '6.18.0-test',
      agentVersion: '0.1.0',
      attachPoints: ['syscalls:sys_enter_write'],
      clockOffsetNs: 5n,
      clockErrorNs: 20_000,
      sampleBackground: 4,
      filter: JSON.stringify({ include: ['service:api'] }),
    });
    writer.recordCounters(BASE - 500_000n, { sys_write_dropped: 1, disk_full_dropped: 0 });
    const events: TestEvent[] = Array.from({ length: 300 }, (_, i) => ({
      ts: at(i),
      dur: 3000 + i,
      service: 'api',
      txn: i % 10 === 9 ? 'OTHER' : 'T1',
      pid: 100,
      comm: 'api-worker',
      bytes: i,
      ...(i % 7 === 6 ? { type: 'block_io' as const } : { target: TARGETS[i % 3]! }),
    }));
    writeEvents(writer, events);
    writer.recordCounters(at(400), { sys_write_dropped: 6, disk_full_dropped: 2 });
    writer.endRun(at(500), 'signal');
  } finally {
    writer.close();
  }
}

describe.each(BACKENDS)('incident export from $kind', (backend) => {
  let server: EventsServer;
  beforeEach(async () => {
    writeAlpha();
    writeStore(dir.path, 'beta', [
      { ts: at(3) + 1n, txn: 'T1', service: 'db', comm: 'db', target: ['socket', 'unix /run/db.sock'] },
    ]);
    server = await startEventsServer(dir.path, backend);
  });
  afterEach(() => server.close());

  const exportUrl = (query: string) => `${server.url}/api/events/export?format=incident&${query}`;

  it("holds the transaction's events exactly as the API gives them, with its runs where the store keeps them", async () => {
    const reply = await getBytes(exportUrl('transaction_id=T1'));
    expect(reply.status).toBe(200);
    expect(reply.contentType).toBe('application/zstd');
    const incident = decodeIncident(reply.body, 'answer');
    const api: ApiEvent[] = await fetchAllPages(server.url, 'transaction_id=T1&limit=1000');
    expect(api).toHaveLength(271);
    expect(incident.events).toEqual(api);
    expect(incident.header).toMatchObject({
      format_version: 1,
      transaction_id: 'T1',
      events: 271,
      first_ns: at(0),
      end_ns: at(298) + 3298n,
      redacted: [],
      source: backend.kind === 'sqlite' ? 'node-stores' : 'clickhouse',
    });
    if (backend.kind === 'clickhouse') {
      // the fleet store has no runs: unknown, never made up
      expect(incident.runs).toBeNull();
      return;
    }
    expect(incident.runs).toEqual([
      {
        node: 'alpha',
        store_id: expect.stringMatching(/^[0-9a-f]{12}$/),
        started_ns: BASE - 1_000_000n,
        stopped_ns: at(500),
        kernel: '6.18.0-test',
        agent_version: '0.1.0',
        clock_error_ns: 20_000n,
        clock_offset_ns: 5n,
        sample_background: 4,
        filter: { include: ['service:api'] },
        start_reason: 'start',
        exit_reason: 'signal',
        counters: { disk_full_dropped: 2, sys_write_dropped: 5 },
        counters_from_ns: BASE - 500_000n,
        counters_to_ns: at(400),
      },
    ]);
    expect(api[0]!.event_id.startsWith(incident.runs![0]!.store_id)).toBe(true);
  });

  it('is byte-identical when exported twice with the same source_date_epoch, and redacts on request', async () => {
    const first = await getBytes(exportUrl('transaction_id=T1&source_date_epoch=1700000000'));
    const second = await getBytes(exportUrl('transaction_id=T1&source_date_epoch=1700000000'));
    expect(first.body.equals(second.body)).toBe(true);
    expect(decodeIncident(first.body, 'x').header.exported_at).toBe('2023-11-14T22:13:20.000Z');
    const redacted = decodeIncident(
      (await getBytes(exportUrl('transaction_id=T1&redact=paths,peers'))).body,
      'x',
    );
    expect(redacted.header.redacted).toEqual(['paths', 'peers']);
    const targets = new Set(redacted.events.flatMap((e) => ('target' in e ? [e.target] : [])));
    expect([...targets].sort()).toEqual(
      ['/p1/p2/p3/p4', '/p1/p2/p3/p5', 'unix /p6/p7', 'tcp h1:5432'].sort(),
    );
    if (backend.kind === 'sqlite') expect(redacted.runs![0]!.filter).toBe('redacted');
  });

  it('answers 404 for an unknown transaction and 400 for filters an incident does not take', async () => {
    expect((await get(exportUrl('transaction_id=NOPE'))).status).toBe(404);
    const noTxn = await get(exportUrl(''));
    expect(noTxn.status).toBe(400);
    expect(noTxn.text).toMatch(/transaction_id/);
    const narrowed = await get(exportUrl('transaction_id=T1&service=api'));
    expect(narrowed.status).toBe(400);
    expect(narrowed.text).toMatch(/service/);
    expect((await get(exportUrl('transaction_id=T1&redact=secrets'))).status).toBe(400);
    expect((await get(`${server.url}/api/events/export?format=chrome-trace&redact=paths`)).status).toBe(400);
  });

  it('kreplay export --format incident writes the file, and leaves it untouched when only the export time differs', async () => {
    const file = join(dir.path, 'checkout.kri');
    const first = await runKreplay([
      'export',
      'T1',
      '--format',
      'incident',
      '-o',
      file,
      '--server',
      server.url,
    ]);
    expect(first.stderr).toMatch(/^wrote .*checkout\.kri \(271 events, sha256:[0-9a-f]{64}\)/);
    expect(first.status).toBe(0);
    const bytes = readFileSync(file);
    const mtime = statSync(file).mtimeMs;
    const again = await runKreplay(
      ['export', 'T1', '--format', 'incident', '-o', file, '--server', server.url],
      60_000,
      {
        SOURCE_DATE_EPOCH: '1900000000',
      },
    );
    expect(again.status).toBe(0);
    expect(again.stderr).toMatch(/checkout\.kri unchanged/);
    expect(readFileSync(file).equals(bytes)).toBe(true);
    expect(statSync(file).mtimeMs).toBe(mtime);
    expect((await readIncidentFile(file)).events).toHaveLength(271);

    const epochFile = join(dir.path, 'epoch.kri');
    for (let i = 0; i < 2; i++) {
      const run = await runKreplay(
        [
          'export',
          'T1',
          '--format',
          'incident',
          '--redact',
          'services',
          '-o',
          epochFile,
          '--server',
          server.url,
        ],
        60_000,
        { SOURCE_DATE_EPOCH: '1700000000' },
      );
      expect(run.status).toBe(0);
    }
    const incident = await readIncidentFile(epochFile);
    expect(incident.header.exported_at).toBe('2023-11-14T22:13:20.000Z');
    expect(new Set(incident.events.map((e) => e.service_name))).toEqual(new Set(['s1', 's2']));

    const bad = await runKreplay([
      'export',
      'T1',
      '--format',
      'incident',
      '--service',
      'api',
      '-o',
      file,
      '--server',
      server.url,
    ]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/whole transaction/);
    const missing = await runKreplay([
      'export',
      'NOPE',
      '--format',
      'incident',
      '-o',
      file,
      '--server',
      server.url,
    ]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/404/);
  });

  it('kreplay incident show summarizes the file; a bad file exits 1 naming it', async () => {
    const file = join(dir.path, 'show.kri');
    expect(
      (await runKreplay(['export', 'T1', '--format', 'incident', '-o', file, '--server', server.url])).status,
    ).toBe(0);
    const shown = await runKreplay(['incident', 'show', file]);
    expect(shown.status).toBe(0);
    expect(shown.stdout).toContain('transaction  T1');
    // it leads with the calls that made the transaction slow or fail
    expect(shown.stdout.split('\n')[1]).toMatch(/^CAUSES: (what made the transaction slow or fail|none)/);
    expect(shown.stdout).toContain('events       271: sys_write 233, block_io 38');
    expect(shown.stdout).toMatch(/\| \/var\/lib\/app\/db\.sqlite +\| file +\| 78 +\|/);
    expect(shown.stdout).toMatch(
      backend.kind === 'sqlite'
        ? /completeness run on alpha .*clock error ±20\.0 µs, kept 1 in 4 writes[^\n]*\n +LOST over the window: disk_full_dropped 2, sys_write_dropped 5/
        : /completeness unknown: exported from ClickHouse/,
    );
    const json = JSON.parse((await runKreplay(['incident', 'show', '--json', file])).stdout) as {
      by_type: Record<string, number>;
      targets: { target: string; calls: number }[];
      causes_marked: boolean;
    };
    expect(json.causes_marked).toBe(true);
    expect(json.by_type).toEqual({ sys_write: 233, block_io: 38 });
    expect(json.targets.reduce((n, t) => n + t.calls, 0)).toBe(271);
    writeFileSync(file, readFileSync(file).subarray(0, 200));
    const bad = await runKreplay(['incident', 'show', file]);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain(`${file}: truncated`);
  });
});
