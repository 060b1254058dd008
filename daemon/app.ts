/**
 * Builds the HTTP app from its dependencies; no module-level state, so tests
 * build as many apps as they like.
 */
import express, { type Express } from 'express';
import type { Logger } from '../agent/log/logger';
import { eventsRouter } from './events/events-router';
import { errorHandler, notFoundHandler } from './http/error-handler';
import type { NodeStores } from './store/node-stores';

export interface AppDeps {
  log: Logger;
  stores: NodeStores;
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
  app.use(notFoundHandler);
  app.use(errorHandler(deps.log));
  return app;
}
