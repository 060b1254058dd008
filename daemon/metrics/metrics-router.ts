/** GET /metrics in the Prometheus text format; needs a read token under --tokens, as every read does. */
import { Router } from 'express';
import type { DaemonMetrics } from './daemon-metrics';

export function metricsRouter(metrics: DaemonMetrics): Router {
  const router = Router();
  router.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  return router;
}
