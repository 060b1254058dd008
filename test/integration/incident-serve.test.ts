/** The daemon serves incident files dropped into <data-dir>/incidents/ or uploaded: listed, searchable, replayable, exportable. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeIncident, IncidentWriter, type IncidentRun } from '../../core/incident';
import type { ApiEvent, Container } from '../../core/model';
import { fetchAllPages, get, getBytes } from '../support/events-http';
import { incidentEvents } from '../support/incident-events';
import { api, startReplayServer, StreamClient, type ReplayServer } from '../support/replay-http';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const dir = useTempDir('kreplay-incident-serve-');
const EXPORTED_AT = '2026-11-23T00:00:00.000Z';

function incidentFile(events: ApiEvent[], txn: string, runs: IncidentRun[] | null): Buffer {
  const writer = new IncidentWriter({ transactionId: txn, source: 'node-stores', exportedAt: EXPORTED_AT });
  for (const e of events) writer.add(e);
  return writer.finish(runs);
}

const events = incidentEvents(300, 'INC-1');
const first = events[0]!.timestamp_ns;
const RUN: IncidentRun = {
  node: 'node-a',
  store_id: events[0]!.event_id.slice(0, 12),
  started_ns: first - 5_000_000_000n,
  stopped_ns: null,
  kernel: '6.18.0',
  agent_version: '0.1.0',
  clock_error_ns: 40_000n,
  clock_offset_ns: 0n,
  sample_background: 1,
  filter: null,
  start_reason: 'start',
  exit_reason: null,
  counters: { disk_full_dropped: 0, sys_write_dropped: 4 },
  counters_from_ns: first - 1_000_000n,
  counters_to_ns: first + 1_000_000_000n,
};

describe('incident files served by the daemon', () => {
  let server: ReplayServer;
  const original = incidentFile(events, 'INC-1', [RUN]);
  beforeEach(async () => {
    mkdirSync(join(dir.path, 'incidents'));
    writeFileSync(join(dir.path, 'incidents', 'checkout.kri'), original);
    writeFileSync(join(dir.path, 'incidents', 'broken.kri'), original.subarray(0, 500));
    server = await startReplayServer(dir.path);
  });
  afterEach(() => server.close());

  it('lists a dropped-in file, and a bad one with why it is skipped', async () => {
    const reply = await get(`${server.url}/api/incidents`);
    expect(reply.status).toBe(200);
    const body = JSON.parse(reply.text) as {
      incidents: Record<string, unknown>[];
      skipped: { file: string; reason: string }[];
    };
    expect(body.incidents).toEqual([
      expect.objectContaining({
        file: 'checkout.kri',
        origin: 'dropped',
        transaction_id: 'INC-1',
        events: 300,
        digest: decodeIncident(original, 'x').header.digest,
        runs: 1,
        store_ids: ['0f0e0d0c0b0a', 'a1b2c3d4e5f6'],
      }),
    ]);
    expect(body.skipped).toEqual([
      {
        file: join(dir.path, 'incidents', 'broken.kri'),
        reason: expect.stringMatching(/broken\.kri: truncated/),
      },
    ]);
  });

  it('serves its events through /api/events under their own ids, and re-exports the same file', async () => {
    const served = await fetchAllPages(server.url, 'transaction_id=INC-1&limit=1000');
    expect(served).toEqual(events);
    const one = await get(`${server.url}/api/events/${events[7]!.event_id}?int64=string`);
    expect(one.status).toBe(200);
    expect(JSON.parse(one.text)).toMatchObject({
      event_id: events[7]!.event_id,
      target: (events[7] as { target: string }).target,
    });
    const byService = await fetchAllPages(server.url, 'service=payments&limit=1000');
    expect(byService).toEqual(events.filter((e) => e.service_name === 'payments'));
    // the same events, runs and counters come back out: the same bytes
    const again = await getBytes(
      `${server.url}/api/events/export?format=incident&transaction_id=INC-1&source_date_epoch=${Date.parse(EXPORTED_AT) / 1000}`,
    );
    expect(again.status).toBe(200);
    expect(decodeIncident(again.body, 'x').runs).toEqual([RUN]);
    expect(again.body.equals(original)).toBe(true);
  });

  it('carries every event type and field through a file and back out of the daemon', async () => {
    const container: Container = {
      id: 'c'.repeat(64),
      runtime: 'podman',
      name: 'web',
      image: 'localhost/web:1',
      pod: 'web-7d9f',
      namespace: 'shop',
      labels: { 'io.kubernetes.pod.name': 'web-7d9f', 'io.kubernetes.pod.namespace': 'shop' },
    };
    const mixed = incidentEvents(60, 'INC-3').map((event, i): ApiEvent => {
      // every third event's process ran in a container
      const e = i % 3 === 0 ? { ...event, container } : event;
      const id = `d${e.event_id.slice(1)}`;
      if (e.event_type === 'block_io' || i % 4 === 0) return { ...e, event_id: id };
      const { event_type: _type, ...fields } = e;
      if (i % 4 === 1)
        return {
          ...fields,
          event_id: id,
          event_type: 'sys_read',
          syscall: 'recvfrom',
          target_kind: 'socket',
          target: 'tcp 10.0.0.5:5432',
          response_ns: i % 8 === 1 ? BigInt(1_000_000 + i) : null,
        } as ApiEvent;
      if (i % 4 === 2)
        return { ...fields, event_id: id, event_type: 'sys_fsync', syscall: 'fdatasync' } as ApiEvent;
      return {
        ...fields,
        event_id: id,
        event_type: 'sys_connect',
        syscall: 'connect',
        ret: -111,
        bytes: 0,
        target_kind: 'socket',
        target: 'tcp 10.0.0.5:5432',
      } as ApiEvent;
    });
    writeFileSync(join(dir.path, 'incidents', 'mixed.kri'), incidentFile(mixed, 'INC-3', null));
    const served = await waitFor(
      async () => {
        const found = await fetchAllPages(server.url, 'transaction_id=INC-3&limit=1000');
        return found.length === 60 && found;
      },
      { what: 'the dropped-in incident to be searchable' },
    );
    const exact = served.map((e) =>
      'response_ns' in e && e.response_ns !== null ? { ...e, response_ns: BigInt(e.response_ns) } : e,
    );
    expect(exact).toEqual(mixed);
    expect(new Set(exact.map((e) => e.event_type))).toEqual(
      new Set(['sys_write', 'sys_read', 'sys_fsync', 'sys_connect', 'block_io']),
    );
    // the container is kept, and its filters answer as on the agent's store
    const inPod = await fetchAllPages(server.url, 'transaction_id=INC-3&pod=web-7d9f&limit=1000');
    expect(inPod.map((e) => e.event_id)).toEqual(mixed.filter((_, i) => i % 3 === 0).map((e) => e.event_id));
  });

  it('replays it like a transaction', async () => {
    const created = await api(server.url, 'POST', '', { transaction_id: 'INC-1', speed_factor: 10 });
    expect(created.status).toBe(201);
    const session = created.body as { id: string; events_total: number };
    expect(session.events_total).toBe(300);
    const stream = await StreamClient.open(server.url, session.id);
    await stream.until((s) => s.states().length === 1);
    expect((await api(server.url, 'POST', `/${session.id}/play`)).status).toBe(200);
    await stream.until((s) => s.states().includes('finished'));
    stream.close();
    expect(stream.replays().map((m) => (JSON.parse(m.data) as { event_id: string }).event_id)).toEqual(
      events.map((e) => e.event_id),
    );
  });

  it('takes an upload, keeps it and serves it; refuses a bad one naming what is wrong', async () => {
    const second = incidentEvents(50, 'INC-2').map((e) => ({ ...e, event_id: `b${e.event_id.slice(1)}` }));
    const bytes = incidentFile(second, 'INC-2', null);
    const post = (body: Buffer, type = 'application/octet-stream') =>
      fetch(`${server.url}/api/incidents`, { method: 'POST', headers: { 'content-type': type }, body });
    const created = await post(bytes);
    expect(created.status).toBe(201);
    const digest = decodeIncident(bytes, 'x').header.digest;
    expect(await created.json()).toEqual({
      id: digest.slice(7, 23),
      transaction_id: 'INC-2',
      events: 50,
      digest,
    });
    const served = await waitFor(
      async () => {
        const found = await fetchAllPages(server.url, 'transaction_id=INC-2&limit=1000');
        return found.length === 50 && found;
      },
      { what: 'the uploaded incident to be searchable' },
    );
    expect(served).toEqual(second);
    const list = JSON.parse((await get(`${server.url}/api/incidents`)).text) as {
      incidents: { origin: string }[];
    };
    expect(list.incidents.map((i) => i.origin).sort()).toEqual(['dropped', 'uploaded']);
    // the same bytes again: the same incident
    expect((await post(bytes)).status).toBe(201);
    expect(
      (JSON.parse((await get(`${server.url}/api/incidents`)).text) as { incidents: unknown[] }).incidents,
    ).toHaveLength(2);

    const truncated = await post(bytes.subarray(0, 100));
    expect(truncated.status).toBe(400);
    expect(await truncated.json()).toMatchObject({
      code: 'E_INVALID_INCIDENT',
      detail: expect.stringMatching(/^the uploaded file: truncated/),
    });
    expect((await post(Buffer.from('not an incident'))).status).toBe(400);
    expect((await post(bytes, 'application/json')).status).toBe(415);
  });

  it('decodes and builds a large dropped-in file off the main thread: /healthz answers before the file is listed', async () => {
    const large = incidentEvents(200_000, 'INC-LARGE').map((e) => ({
      ...e,
      event_id: `c${e.event_id.slice(1)}`,
    }));
    writeFileSync(join(dir.path, 'incidents', 'large.kri'), incidentFile(large, 'INC-LARGE', null));
    const order: string[] = [];
    // the listing waits for the file's decode and store; the main thread answers meanwhile
    const listed = get(`${server.url}/api/incidents`).then((reply) => {
      order.push('listed');
      return JSON.parse(reply.text) as { incidents: { transaction_id: string; events: number }[] };
    });
    const health = await get(`${server.url}/healthz`);
    order.push('healthz');
    expect(health.status).toBe(200);
    expect((await listed).incidents).toContainEqual(
      expect.objectContaining({ transaction_id: 'INC-LARGE', events: 200_000 }),
    );
    expect(order).toEqual(['healthz', 'listed']);
  });
});
