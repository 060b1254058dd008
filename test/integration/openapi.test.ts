/** GET /api/openapi.json: a valid OpenAPI 3.1 document that lists every route the app serves and matches what they answer. */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Express } from 'express';
import { z } from 'zod';
import { silentLogger } from '../../core/log/logger';
import { createApp } from '../../daemon/app';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { DaemonMetrics } from '../../daemon/metrics/daemon-metrics';
import { OPERATIONS } from '../../daemon/openapi/openapi-document';
import {
  eventPageSchema,
  eventSchema,
  incidentCreatedSchema,
  incidentListSchema,
  livenessSchema,
  problemSchema,
  readinessSchema,
  sessionListSchema,
  sessionSchema,
} from '../../daemon/openapi/response-schemas';
import { CONTROLS } from '../../daemon/replay/sessions/session-state';
import { HighResClock } from '../../daemon/replay/clock/high-res-clock';
import { ReplaySessions } from '../../daemon/replay/sessions/session-service';
import { storeTransactionReader } from '../../daemon/replay/transaction-reader';
import { nodeStoresReader } from '../../daemon/store/event-reader';
import { NodeStores } from '../../daemon/store/node-stores';
import { IncidentThread } from '../../daemon/incidents/incident-thread';
import { repoRoot } from '../../core/repo-root';
import { readFileSync } from 'node:fs';
import { writeStore } from '../support/event-store';

const T0 = 1_795_345_678_000_000_000n;
const VALIDATOR = join(
  __dirname,
  '..',
  '..',
  'node_modules',
  '@seriousme',
  'openapi-schema-validator',
  'bin',
  'validate-api-cli.js',
);

type Layer = {
  name: string;
  rawPath?: string;
  route?: { path: string; methods: Record<string, boolean> };
  handle: { stack?: Layer[] };
};

/** Every (method, path) the app routes, as OpenAPI templates, found by walking its router. */
function servedRoutes(app: Express): string[] {
  const found: string[] = [];
  const walk = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        const path = `${prefix}${layer.route.path}`.replace(/\/+/g, '/').replace(/(.)\/$/, '$1');
        for (const method of Object.keys(layer.route.methods)) found.push(`${method} ${path}`);
      } else if (layer.handle.stack) {
        walk(layer.handle.stack, prefix + (layer.rawPath ?? ''));
      } else if (layer.name === 'serveStatic') {
        found.push(`get ${`${prefix}${layer.rawPath}`.replace(/\/+/g, '/')}/:file`);
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '');
  return found
    .flatMap((route) =>
      // one route serves every control; the document has one operation per control
      route.endsWith('/:control') ? CONTROLS.map((c) => route.replace(':control', c)) : [route],
    )
    .map((route) => route.replace(/:(\w+)/g, '{$1}'))
    .sort();
}

describe('OpenAPI document', () => {
  let daemon: Daemon;
  let doc: Record<string, unknown>;
  const dir = { path: '' };
  beforeAll(async () => {
    dir.path = mkdtempSync(join(tmpdir(), 'kreplay-openapi-'));
    writeStore(dir.path, 'n1', [
      { ts: T0, txn: 'tx1', target: ['file', '/var/log/app.log'] },
      { ts: T0 + 10n, txn: 'tx1', type: 'block_io' },
    ]);
    daemon = await createDaemon({ dataDir: dir.path, log: silentLogger });
    doc = (await (await fetch(`${daemon.url}/api/openapi.json`)).json()) as Record<string, unknown>;
  });
  afterAll(async () => {
    await daemon.close();
    rmSync(dir.path, { recursive: true, force: true });
  });

  it('is a valid OpenAPI 3.1 document (checked by an OpenAPI validator)', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const file = join(dir.path, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const out = await new Promise<string>((resolve) =>
      execFile(process.execPath, [VALIDATOR, file], (_err, stdout, stderr) => resolve(stdout + stderr)),
    );
    expect(JSON.parse(out)).toEqual({ valid: true });
  });

  it("says min_duration_ms matches a call's duration or a read's response wait", () => {
    const events = (
      doc.paths as Record<
        string,
        { get: { parameters: { name: string; schema: { description?: string } }[] } }
      >
    )['/api/events']!.get;
    const param = events.parameters.find((p) => p.name === 'min_duration_ms')!;
    expect(param.schema.description).toMatch(/duration_ns, or \(a socket read's\) response_ns/);
  });

  it('lists every route the app serves, and nothing it does not', async () => {
    const stores = new NodeStores(dir.path, silentLogger);
    const clock = new HighResClock(silentLogger);
    const replay = new ReplaySessions({
      dataDir: dir.path,
      reader: storeTransactionReader(nodeStoresReader(stores)),
      clock,
      log: silentLogger,
      ttlMs: 1000,
    });
    const incidents = new IncidentThread(dir.path, silentLogger);
    const app = createApp({
      log: silentLogger,
      stores,
      replay,
      webRoot: dir.path,
      metrics: new DaemonMetrics(),
      incidents,
    });
    const documented = OPERATIONS.map((op) => `${op.method} ${op.path}`).sort();
    expect(servedRoutes(app)).toEqual(documented);
    const paths = doc.paths as Record<string, Record<string, unknown>>;
    expect(
      Object.entries(paths)
        .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`))
        .sort(),
    ).toEqual(documented);
    await replay.close();
    await clock.close();
    await incidents.close();
    stores.close();
  });

  it('documents the query parameters and bodies the routes validate, from the same schemas', () => {
    const paths = doc.paths as Record<
      string,
      Record<string, { parameters: { name: string; schema: unknown }[] }>
    >;
    const names = paths['/api/events']!.get!.parameters.map((p) => p.name);
    expect(names).toEqual(
      expect.arrayContaining(['transaction_id', 'trace_id', 'from', 'to', 'limit', 'cursor', 'order']),
    );
    const order = paths['/api/events']!.get!.parameters.find((p) => p.name === 'order')!;
    expect(order.schema).toMatchObject({ enum: ['asc', 'desc'] });
    const create = (
      paths['/api/replay/sessions']!.post as unknown as {
        requestBody: { content: { 'application/json': { schema: { properties: Record<string, unknown> } } } };
      }
    ).requestBody.content['application/json'].schema;
    expect(create.properties.speed_factor).toMatchObject({ minimum: 0.001, maximum: 1000 });
    expect(create).toMatchObject({ additionalProperties: false });
  });

  it('describes what the routes really answer: responses parse with the documented schemas', async () => {
    const get = async (path: string, schema: z.ZodType, status = 200) => {
      const res = await fetch(`${daemon.url}${path}`);
      expect([path, res.status]).toEqual([path, status]);
      return schema.parse(await res.json());
    };
    await get('/healthz', livenessSchema);
    await get('/readyz', readinessSchema);
    const page = (await get('/api/events?transaction_id=tx1', eventPageSchema)) as {
      events: { event_id: string }[];
    };
    expect(page.events).toHaveLength(2);
    await get('/api/events?int64=string', eventPageSchema);
    await get(`/api/events/${page.events[0]!.event_id}`, eventSchema);
    await get('/api/events?limit=0', problemSchema, 400);
    await get('/api/events/nope', problemSchema, 400);
    const created = await fetch(`${daemon.url}/api/replay/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ transaction_id: 'tx1' }),
    });
    expect(created.status).toBe(201);
    const session = sessionSchema.parse(await created.json());
    await get(`/api/replay/sessions/${session.id}`, sessionSchema);
    await get('/api/replay/sessions', sessionListSchema);
    await get('/api/replay/sessions/none', problemSchema, 404);
    const upload = await fetch(`${daemon.url}/api/incidents`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: readFileSync(join(repoRoot(), 'test', 'fixtures', 'incident-v1.kri')),
    });
    expect(upload.status).toBe(201);
    incidentCreatedSchema.parse(await upload.json());
    const list = (await get('/api/incidents', incidentListSchema)) as { incidents: unknown[] };
    expect(list.incidents).toHaveLength(1);
  });
});
