/**
 * Liveness and readiness, open to the host's supervisor without a token.
 * /healthz: the process answers. /readyz: what it serves from, store by
 * store: 200 when every `.db` file of the data dir is served, 503 naming
 * what is not (a data dir it cannot list, a store it skipped as damaged or
 * unreadable), with the newest event's age per store for staleness alerts;
 * and the query workers: 503 while none is up (they keep dying), naming why;
 * and the incident library: 503 while a request to it is past its deadline.
 */
import { Router } from 'express';
import type { NodeStores } from '../store/node-stores';
import type { PoolHealth } from '../queries/query-pool';
import { epochNs } from '../../core/epoch-ns';

export function healthRouter(
  stores: NodeStores,
  queryWorkers?: () => PoolHealth,
  /** seconds the incident library has not answered, past its deadline; null while it answers */
  incidentsStuckForS?: () => number | null,
): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', (_req, res) => {
    const { dirError, stores: open, skipped } = stores.health();
    const now = epochNs();
    const served = open.map((store) => {
      const newest = store.damage ? null : safeNewest(store);
      return {
        node: store.info.node,
        file: store.path,
        newest_event_age_s: newest === null ? null : Number(now - newest) / 1e9,
      };
    });
    const workers = queryWorkers?.();
    const stuck = incidentsStuckForS?.() ?? null;
    const ready = dirError === null && skipped.length === 0 && (!workers || workers.up > 0) && stuck === null;
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ready' : 'degraded',
      data_dir_error: dirError,
      stores: served,
      skipped,
      ...(workers && { query_workers: workers }),
      ...(incidentsStuckForS && {
        incident_library: stuck === null ? { status: 'ok' } : { status: 'stuck', stuck_for_s: stuck },
      }),
    });
  });
  return router;
}

/** A store found damaged by this very read is skipped from the next call on. */
function safeNewest(store: { newestTs(): bigint | null }): bigint | null {
  try {
    return store.newestTs();
  } catch {
    return null;
  }
}
