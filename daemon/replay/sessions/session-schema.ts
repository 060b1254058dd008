/** Request bodies of the session routes: JSON objects, unknown fields refused. */
import type { Request } from 'express';
import { z } from 'zod';
import { badRequest } from '../../http/problem';
import { parseQuery } from '../../http/query-params';
import { MAX_EXTRA_LATENCY_NS, SPEED_FACTOR } from './session-limits';

export const speedFactorSchema = z.number().min(SPEED_FACTOR.min).max(SPEED_FACTOR.max);

/**
 * The process a session drives (`kreplay replay --exec`): its command line and
 * pid on the daemon's host. The session stops when that process is gone.
 */
export const drivingSchema = z.strictObject({
  command: z.string().min(1, 'must not be empty').max(4096),
  pid: z.number().int().min(1).max(4_194_304),
});
export type Driving = z.output<typeof drivingSchema>;

export const createSessionSchema = z.strictObject({
  transaction_id: z.string().min(1, 'must not be empty'),
  speed_factor: speedFactorSchema.default(1),
  // integers up to 6e10 are exact in a JS number; int() refuses fractions and unsafe integers
  extra_latency_ns: z.number().int().min(0).max(MAX_EXTRA_LATENCY_NS).default(0),
  driving: drivingSchema.nullable().default(null),
});
export type CreateSessionBody = z.output<typeof createSessionSchema>;

export const seekSchema = z.strictObject({ position_ns: z.number().int().min(0) });

/** play, pause and stop take no parameters: no body, or {} */
export const emptySchema = z.strictObject({});

const hasBody = (req: Request) =>
  req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

/** The parsed body, or a 400 problem naming each field at fault (`body` for the body as a whole). */
export function parseBody<S extends z.ZodType>(schema: S, req: Request): z.output<S> {
  let body: unknown = req.body;
  if (body === undefined) {
    if (hasBody(req))
      throw badRequest(
        [{ param: 'body', message: 'expected Content-Type: application/json' }],
        'invalid-body',
      );
    body = {};
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw badRequest([{ param: 'body', message: 'expected a JSON object' }], 'invalid-body');
  return parseQuery(schema, body);
}
