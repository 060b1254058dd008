/**
 * GET /api/openapi.json: the OpenAPI 3.1 description of every route, built
 * from the zod schemas that validate the requests (query strings, bodies)
 * and those the OpenAPI test checks real responses against. Nothing here
 * restates a field, a bound or a choice: change a schema and the document
 * follows.
 */
import { z } from 'zod';
import { VERSION } from '../../core/version';
import { eventsQuerySchema, int64Param } from '../events/events-query';
import { exportQuerySchema } from '../events/export/export-query';
import { PROBLEM_KINDS, type ProblemKind } from '../../core/problem-kinds';
import { createSessionSchema, emptySchema, seekSchema } from '../replay/sessions/session-schema';
// the response schemas register their ids in zod's registry, from which the components are built
import './response-schemas';

type JsonSchema = Record<string, unknown>;

interface Operation {
  method: 'get' | 'post' | 'delete';
  /** OpenAPI path template, e.g. /api/replay/sessions/{id} */
  path: string;
  summary: string;
  /** an object schema whose keys are the query parameters */
  query?: z.ZodObject;
  body?: z.ZodType;
  /** a body that is not JSON: its media type */
  rawBody?: { type: string; description: string };
  /** status → a response schema's id in components, or a media type and description */
  responses: Record<number, string | { type: string; description: string }>;
  /** problem kinds this operation answers with besides those of every route */
  problems?: ProblemKind[];
  /** needs no token (the supervisor's probes and the page) */
  open?: boolean;
}

const eventQuery = z.strictObject({ int64: int64Param.optional() });
const sessionControl = (control: string, body: z.ZodType, summary: string): Operation => ({
  method: 'post',
  path: `/api/replay/sessions/{id}/${control}`,
  summary,
  body,
  responses: { 200: 'Session' },
  problems: [
    'session-not-found',
    'invalid-state',
    'invalid-body',
    'body-too-large',
    'unsupported-media-type',
  ],
});

/** Every route the daemon serves (the OpenAPI test walks the app and checks each is here). */
export const OPERATIONS: Operation[] = [
  {
    method: 'get',
    path: '/',
    summary: 'the incident timeline page (it reads this API with the token it asks for)',
    responses: { 200: { type: 'text/html', description: 'the page' } },
    open: true,
  },
  {
    method: 'get',
    path: '/assets/{file}',
    summary: "the page's content-hashed scripts and styles, cached for a year",
    responses: { 200: { type: 'application/octet-stream', description: 'an asset' } },
    problems: ['route-not-found'],
    open: true,
  },
  { method: 'get', path: '/healthz', summary: 'liveness', responses: { 200: 'Liveness' }, open: true },
  {
    method: 'get',
    path: '/readyz',
    summary: 'readiness: each node store served, the newest event age, stores skipped and why',
    responses: { 200: 'Readiness', 503: 'Readiness' },
    open: true,
  },
  {
    method: 'get',
    path: '/metrics',
    summary:
      'Prometheus text format: requests and their latency per route and status, replay sessions per state, SSE watchers, replay release and delivery lateness',
    responses: { 200: { type: 'text/plain', description: 'Prometheus exposition format 0.0.4' } },
  },
  {
    method: 'get',
    path: '/api/openapi.json',
    summary: 'this document',
    responses: { 200: { type: 'application/json', description: 'OpenAPI 3.1' } },
  },
  {
    method: 'get',
    path: '/api/events',
    summary: 'events matching every filter given, in (timestamp_ns, event_id) order, paged by cursor',
    query: eventsQuerySchema,
    responses: { 200: 'EventPage' },
    problems: ['invalid-parameter', 'store-unavailable', 'store-damaged'],
  },
  {
    method: 'get',
    path: '/api/events/export',
    summary:
      'the matching events as a Chrome trace-event file (Perfetto, chrome://tracing), streamed; with format=otlp, as one OTLP/JSON ExportTraceServiceRequest (each event of a W3C trace a span in it, docs/query.md "OTLP"); with format=incident, one transaction as an incident file (application/zstd, docs/query.md "Incident files")',
    query: exportQuerySchema,
    responses: {
      200: {
        type: 'application/json',
        description:
          'Chrome trace-event JSON, or OTLP/JSON with format=otlp (header X-Kreplay-Events: the events the filter matched; those without a W3C trace id are not in the file); format=incident answers application/zstd, the incident file',
      },
    },
    problems: [
      'invalid-parameter',
      'transaction-not-found',
      'export-too-large',
      'store-unavailable',
      'store-damaged',
    ],
  },
  {
    method: 'get',
    path: '/api/page-settings',
    summary: "what the timeline page is told: the trace viewer it links each event's trace to (--trace-url)",
    responses: { 200: 'PageSettings' },
  },
  {
    method: 'get',
    path: '/api/events/{event_id}',
    summary: 'one event by its id',
    query: eventQuery,
    responses: { 200: 'Event' },
    problems: ['invalid-parameter', 'event-not-found', 'store-unavailable', 'store-damaged'],
  },
  {
    method: 'get',
    path: '/api/incidents',
    summary:
      'the incident files served read-only (dropped into <data-dir>/incidents/ or uploaded), and those skipped with why; their events are searchable and replayable like any',
    responses: { 200: 'IncidentList' },
  },
  {
    method: 'post',
    path: '/api/incidents',
    summary:
      'upload an incident file: checked whole, kept under <data-dir>/.replay/incidents/, then served like a dropped-in one',
    rawBody: { type: 'application/octet-stream', description: 'the incident file (.kri) as it is' },
    responses: { 201: 'IncidentCreated' },
    problems: ['invalid-incident', 'body-too-large', 'unsupported-media-type', 'too-many-uploads'],
  },
  {
    method: 'get',
    path: '/api/replay/sessions',
    summary: 'every replay session, in creation order',
    responses: { 200: 'SessionList' },
  },
  {
    method: 'post',
    path: '/api/replay/sessions',
    summary: 'create a replay session of a transaction (Location: the session)',
    body: createSessionSchema,
    responses: { 201: 'Session' },
    problems: [
      'invalid-body',
      'body-too-large',
      'unsupported-media-type',
      'transaction-not-found',
      'too-many-sessions',
      'shutting-down',
    ],
  },
  {
    method: 'get',
    path: '/api/replay/sessions/{id}',
    summary: 'one session',
    responses: { 200: 'Session' },
    problems: ['session-not-found'],
  },
  {
    method: 'delete',
    path: '/api/replay/sessions/{id}',
    summary: 'stop a session and forget it',
    responses: { 204: { type: 'none', description: 'deleted' } },
    problems: ['session-not-found'],
  },
  {
    method: 'get',
    path: '/api/replay/sessions/{id}/events',
    summary:
      'Server-Sent Events: `state` on each change, `replay` per event as it is emitted (id: its index; Last-Event-ID resumes)',
    responses: { 200: { type: 'text/event-stream', description: 'the session stream' } },
    problems: ['session-not-found', 'too-many-streams'],
  },
  sessionControl('play', emptySchema, 'play from the position'),
  sessionControl('pause', emptySchema, 'pause where it is'),
  sessionControl('stop', emptySchema, 'stop for good; the streams end'),
  sessionControl('seek', seekSchema, 'move the position (ns into the replayed timeline)'),
];

/** Every route may answer these. */
const COMMON_PROBLEMS: ProblemKind[] = ['unauthorized', 'forbidden', 'host-not-allowed', 'internal'];

const schemaOf = (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
};
const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

function parameters(op: Operation): JsonSchema[] {
  const inPath = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
    name: m[1],
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
  const shape = op.query?.shape ?? {};
  const inQuery = Object.entries(shape).map(([name, schema]) => ({
    name,
    in: 'query',
    required: !(schema as z.ZodType).safeParse(undefined).success,
    schema: schemaOf(schema as z.ZodType, 'input'),
  }));
  return [...inPath, ...inQuery];
}

function responses(op: Operation): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [status, what] of Object.entries(op.responses)) {
    if (typeof what === 'string') {
      out[status] = { description: what, content: { 'application/json': { schema: ref(what) } } };
    } else if (what.type === 'none') {
      out[status] = { description: what.description };
    } else {
      out[status] = { description: what.description, content: { [what.type]: { schema: {} } } };
    }
  }
  const kinds = [...(op.problems ?? []), ...(op.open ? [] : COMMON_PROBLEMS)];
  const byStatus = new Map<number, ProblemKind[]>();
  for (const kind of kinds) {
    const status = PROBLEM_KINDS[kind].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), kind]);
  }
  for (const [status, list] of byStatus) {
    out[String(status)] = {
      description: `problem: ${list.join(', ')}`,
      content: { 'application/problem+json': { schema: ref('Problem') } },
    };
  }
  return out;
}

/** The document, built once per daemon. */
export function openApiDocument(): JsonSchema {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    const operation: Record<string, unknown> = {
      summary: op.summary,
      operationId: `${op.method}${op.path.replace(/[^a-zA-Z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
      parameters: parameters(op),
      responses: responses(op),
    };
    if (op.body)
      operation.requestBody = {
        required: false,
        content: { 'application/json': { schema: schemaOf(op.body, 'input') } },
      };
    if (op.rawBody)
      operation.requestBody = {
        required: true,
        description: op.rawBody.description,
        content: { [op.rawBody.type]: { schema: { type: 'string', format: 'binary' } } },
      };
    if (op.open) operation.security = [];
    (paths[op.path] ??= {})[op.method] = operation;
  }
  const components = z.toJSONSchema(z.globalRegistry, {
    uri: (id) => `#/components/schemas/${id}`,
    io: 'output',
    unrepresentable: 'any',
  }) as { schemas: Record<string, JsonSchema> };
  for (const schema of Object.values(components.schemas)) {
    delete schema.$schema;
    delete schema.$id;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'kreplay daemon',
      version: VERSION,
      description:
        'What the kernel saw, queried and replayed. Errors are RFC 9457 problem+json with a stable type and code per kind.',
    },
    paths,
    components: {
      schemas: components.schemas,
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'kreplay daemon --tokens FILE; read or control scope',
        },
      },
    },
    security: [{ bearer: [] }],
  };
}
