/**
 * One log line per request once it is answered (or its stream ends):
 * method, route template, path, status, duration and request id. The id is
 * the client's `x-request-id` when it sends a sane one (a proxy's), else a
 * new UUID, and is echoed in the response so both sides can quote it.
 */
import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from '../../core/log/logger';
import type { RequestDone } from '../metrics/daemon-metrics';

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/** Where the accessor below keeps a request's route, and the template it saw. */
const ROUTE = Symbol('route');
const TEMPLATE = Symbol('route template');

interface Tracked {
  baseUrl: string;
  [ROUTE]?: unknown;
  [TEMPLATE]: string | null;
}

/**
 * Records the route template that handled each request (e.g. /api/events/:event_id), taken when
 * Express enters the route: by the time an error is answered, it has left the router and
 * req.baseUrl is reset. One accessor on the app's request prototype, defined once: defined on each
 * request, it cost the daemon's main thread 35–75 µs a /healthz (of 260–300), the request
 * object then leaving V8's fast paths for every later property access.
 */
function trackRoutes(proto: object): void {
  Object.defineProperty(proto, 'route', {
    configurable: true,
    enumerable: true,
    get(this: Tracked) {
      return this[ROUTE];
    },
    set(this: Tracked, route: { path?: unknown } | undefined) {
      this[ROUTE] = route;
      if (route && typeof route.path === 'string')
        this[TEMPLATE] = `${this.baseUrl}${route.path}`.replace(/(.)\/$/, '$1');
    },
  });
}

/** `counted` (the metrics) sees every finished request too. */
export function requestLog(log: Logger, counted?: (done: RequestDone) => void): RequestHandler {
  const tracked = new WeakSet<object>();
  return (req, res, next) => {
    // Express gives each request its app's request prototype
    const proto = Object.getPrototypeOf(req) as object;
    if (!tracked.has(proto)) {
      trackRoutes(proto);
      tracked.add(proto);
    }
    const route = req as unknown as Tracked;
    route[TEMPLATE] = null;
    const started = process.hrtime.bigint();
    const offered = req.headers['x-request-id'];
    const id = typeof offered === 'string' && REQUEST_ID.test(offered) ? offered : randomUUID();
    res.setHeader('x-request-id', id);
    // read now: once the answer closes the connection the request has no socket
    const client = req.socket.remoteAddress;
    const done = () => {
      res.off('finish', done);
      res.off('close', done);
      const fields = {
        method: req.method,
        // the template, so that lines group by route; null when no route matched
        route: route[TEMPLATE],
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
