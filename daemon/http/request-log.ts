/**
 * One log line per request once it is answered (or its stream ends):
 * method, route template, path, status, duration and request id. The id is
 * the client's `x-request-id` when it sends a sane one (a proxy's), else a
 * new UUID, and is echoed in the response so both sides can quote it.
 */
import { randomUUID } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import type { Logger } from '../../core/log/logger';
import type { RequestDone } from '../metrics/daemon-metrics';

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * The route template that handled the request (e.g. /api/events/:event_id),
 * taken when Express enters the route: by the time an error is answered,
 * it has left the router and req.baseUrl is reset.
 */
function recordRoute(req: Request): { template: string | null } {
  const seen: { template: string | null } = { template: null };
  let current: unknown = req.route;
  Object.defineProperty(req, 'route', {
    configurable: true,
    enumerable: true,
    get: () => current,
    set: (route: { path?: unknown } | undefined) => {
      current = route;
      if (route && typeof route.path === 'string')
        seen.template = `${req.baseUrl}${route.path}`.replace(/(.)\/$/, '$1');
    },
  });
  return seen;
}

/** `counted` (the metrics) sees every finished request too. */
export function requestLog(log: Logger, counted?: (done: RequestDone) => void): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    const offered = req.headers['x-request-id'];
    const id = typeof offered === 'string' && REQUEST_ID.test(offered) ? offered : randomUUID();
    res.setHeader('x-request-id', id);
    const route = recordRoute(req);
    // read now: once the answer closes the connection the request has no socket
    const client = req.socket.remoteAddress;
    const done = () => {
      res.off('finish', done);
      res.off('close', done);
      const fields = {
        method: req.method,
        // the template, so that lines group by route; null when no route matched
        route: route.template,
        path: req.originalUrl.split('?')[0],
        status: res.statusCode,
        duration_ms: Number(process.hrtime.bigint() - started) / 1e6,
        request_id: id,
        client,
        // a client that went away before the answer was complete
        ...(res.writableFinished ? {} : { aborted: true }),
      };
      counted?.(fields);
      if (res.statusCode >= 500) log.warn('request', fields);
      else log.info('request', fields);
    };
    res.on('finish', done);
    res.on('close', done);
    next();
  };
}
