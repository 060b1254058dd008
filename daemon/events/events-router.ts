/** GET /api/events (filtered, paged), GET /api/events/export (streamed trace file) and GET /api/events/{event_id}. */
import { Router, type ErrorRequestHandler } from 'express';
import { z } from 'zod';
import { badRequest, ProblemError } from '../http/problem';
import { parseQuery } from '../http/query-params';
import type { EventReader } from '../store/event-reader';
import { eventsQuerySchema, int64Param, toFilter } from './events-query';
import { exportQuerySchema } from './export/export-query';
import { streamTrace } from './export/export-stream';
import { sendIncident, type IncidentRuns } from './export/incident-export';
import { localEventsJson, type EventsJson, type JsonBody } from './events-json';

const eventQuerySchema = z.strictObject({ int64: int64Param.optional() });

/* The router reports an undecodable path segment ("%zz") as a bare 400; name the parameter. */
const pathDecodeError: ErrorRequestHandler = (err, _req, _res, next) => {
  const status = (err as { status?: unknown })?.status;
  next(
    status === 400 && !(err instanceof ProblemError)
      ? badRequest([{ param: 'event_id', message: 'malformed percent-encoding' }])
      : err,
  );
};

/** Bytes from a worker go out as they are: no string on this thread. */
const body = (json: JsonBody) =>
  typeof json === 'string' ? json : Buffer.from(json.buffer, json.byteOffset, json.byteLength);

/**
 * `json` builds the pages and lookups (in the query workers for node stores); `stores` serves the
 * export, and `runs` the recording runs an incident file holds (null: the store keeps none).
 */
export function eventsRouter(
  stores: EventReader,
  json: EventsJson = localEventsJson(stores),
  runs: IncidentRuns = null,
): Router {
  const router = Router();
  router.get('/', async (req, res) => {
    const query = parseQuery(eventsQuerySchema, req.query);
    res.type('application/json').send(body(await json.list(query)));
  });
  router.get('/export', async (req, res) => {
    const query = parseQuery(exportQuerySchema, req.query);
    if (query.format === 'incident') {
      const { transaction_id: transactionId, redact, source_date_epoch: sourceDateEpoch } = query;
      await sendIncident(stores, runs, { transactionId: transactionId!, redact, sourceDateEpoch }, res);
    } else await streamTrace(stores, toFilter(query), query.format ?? 'chrome-trace', res);
  });
  router.get('/:event_id', async (req, res) => {
    const { int64 } = parseQuery(eventQuerySchema, req.query);
    res.type('application/json').send(body(await json.one(req.params.event_id, int64 === 'string')));
  });
  router.use(pathDecodeError);
  return router;
}
