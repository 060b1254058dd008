/**
 * Builds the HTTP app from its dependencies; no module-level state, so tests
 * build as many apps as they like.
 */
import express, { type Express } from 'express';
import type { Logger } from '../core/log/logger';
import { eventsRouter } from './events/events-router';
import { errorHandler, notFoundHandler } from './http/error-handler';
import { replaySessionsRouter } from './replay/sessions/session-router';
import type { ReplaySessions } from './replay/sessions/session-service';
import type { NodeStores } from './store/node-stores';
import { webRouter } from './web/web-router';

export interface AppDeps {
  log: Logger;
  stores: NodeStores;
  /** replay sessions; the routes exist only when given */
  replay?: ReplaySessions;
  /** the built web page (dist/web); served at / when given */
  webRoot?: string;
}

export function createApp(deps: AppDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.use('/api/events', eventsRouter(deps.stores));
  if (deps.replay) app.use('/api/replay/sessions', replaySessionsRouter(deps.replay));
  if (deps.webRoot) app.use(webRouter(deps.webRoot));
  app.use(notFoundHandler);
  app.use(errorHandler(deps.log));
  return app;
}
