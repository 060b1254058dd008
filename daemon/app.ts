/**
 * Builds the HTTP app from its dependencies; no module-level state, so tests
 * build as many apps as they like.
 */
import express, { type Express } from 'express';
import type { Logger } from '../core/log/logger';
import { checkHost, originFormOnly, requireToken, sameOriginWrites } from './auth/auth-middleware';
import type { TokenStore } from './auth/token-store';
import type { EventsJson } from './events/events-json';
import { eventsRouter } from './events/events-router';
import type { IncidentRuns } from './events/export/incident-export';
import type { IncidentThread } from './incidents/incident-thread';
import type { MemoryTrim } from './http/memory-trim';
import { incidentsRouter } from './incidents/incidents-router';
import { healthRouter } from './health/health-router';
import { openApiRouter } from './openapi/openapi-router';
import { errorHandler, notFoundHandler } from './http/error-handler';
import { requestLog } from './http/request-log';
import type { DaemonMetrics } from './metrics/daemon-metrics';
import { metricsRouter } from './metrics/metrics-router';
import { replaySessionsRouter } from './replay/sessions/session-router';
import { StreamLimits } from './replay/stream/stream-limits';
import type { ReplaySessions } from './replay/sessions/session-service';
import { nodeStoresReader, type EventReader } from './store/event-reader';
import type { NodeStores } from './store/node-stores';
import type { PoolHealth } from './queries/query-pool';
import { webRouter } from './web/web-router';
import { pageSettingsRouter } from './web/page-settings';

export interface AppDeps {
  log: Logger;
  stores: NodeStores;
  /** where GET /api/events reads; default the node stores, here on the main thread */
  events?: EventReader;
  /** who turns events pages and lookups into JSON; default: built here from `events` */
  eventsJson?: EventsJson;
  /** replay sessions; the routes exist only when given */
  replay?: ReplaySessions;
  /** the built web page (dist/web); served at / when given */
  webRoot?: string;
  /** bearer tokens; without them only requests to one of the daemon's own host names are served */
  tokens?: TokenStore;
  /** host names besides loopback's that the Host header may carry when there are no tokens */
  allowedHosts?: readonly string[];
  /** served at /metrics when given */
  metrics?: DaemonMetrics;
  /** how many event streams may be open (default: the defaults of stream-limits.ts) */
  streamLimits?: StreamLimits;
  /**
   * `events` is a fleet store (ClickHouse): it keeps no recording runs (an incident exported from it
   * says its completeness is unknown), and skips no node store
   */
  fleetStore?: boolean;
  /** the incident files served (GET/POST /api/incidents); the routes exist only when given */
  incidents?: IncidentThread;
  /** the query workers' state, for /readyz, when queries run on them */
  queryWorkers?: () => PoolHealth;
  /** told when a load that took memory (an upload) is over */
  memoryTrim?: MemoryTrim;
  /** --trace-url: the trace viewer the page links each event's trace to ({trace_id} in it) */
  traceUrl?: string;
}

export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use(requestLog(deps.log.child('http'), deps.metrics && ((done) => deps.metrics!.request(done))));
  app.use(originFormOnly, sameOriginWrites);
  if (deps.tokens) {
    // the page and its assets hold no data: a browser loads them without a token, then the page asks for one
    if (deps.webRoot) app.use(webRouter(deps.webRoot));
    app.use(requireToken(deps.tokens));
  } else {
    app.use(checkHost(deps.allowedHosts ?? []));
    if (deps.webRoot) app.use(webRouter(deps.webRoot));
  }
  const incidents = deps.incidents;
  app.use(healthRouter(deps.stores, deps.queryWorkers, incidents && (() => incidents.stuckForS())));
  app.use(openApiRouter());
  if (deps.metrics) app.use(metricsRouter(deps.metrics));
  const events = deps.events ?? nodeStoresReader(deps.stores);
  const runs: IncidentRuns = deps.fleetStore
    ? null
    : (ids: ReadonlySet<string>, from: bigint, to: bigint) => deps.stores.incidentRuns(ids, from, to);
  app.use('/api/events', eventsRouter(events, deps.eventsJson, runs));
  app.use('/api/page-settings', pageSettingsRouter({ trace_url: deps.traceUrl ?? null }));
  if (deps.incidents)
    app.use(
      '/api/incidents',
      incidentsRouter(deps.incidents, undefined, () => deps.memoryTrim?.loadEnded()),
    );
  if (deps.replay)
    app.use(
      '/api/replay/sessions',
      replaySessionsRouter(deps.replay, deps.streamLimits ?? new StreamLimits(deps.log.child('streams'))),
    );
  app.use(notFoundHandler);
  // a lookup that found nothing names the node stores it skipped (damaged, not stores)
  const skipped = deps.fleetStore ? undefined : () => deps.stores.health().skipped;
  app.use(errorHandler(deps.log, skipped));
  return app;
}
