/**
 * GET /api/page-settings: what the daemon was told about the page, so far the
 * trace viewer the timeline links each event's trace to (--trace-url, a URL
 * template holding {trace_id}: Jaeger, Tempo in Grafana, any viewer of the
 * traces the agent exports with --otlp).
 */
import { Router } from 'express';

export interface PageSettings {
  trace_url: string | null;
}

export function pageSettingsRouter(settings: PageSettings): Router {
  const router = Router();
  router.get('/', (_req, res) => {
    res.json(settings);
  });
  return router;
}
