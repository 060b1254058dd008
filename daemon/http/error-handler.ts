/** Turns every failure into problem+json; never a stack trace, never a 500 for bad input. */
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from '../../core/log/logger';
import { ClickHouseError } from '../../core/clickhouse/http-client';
import { StoreError } from '../../core/store/schema';
import { ProblemError } from './problem';
import type { ProblemKind } from '../../core/problem-kinds';

export function sendProblem(res: Parameters<RequestHandler>[1], error: ProblemError): void {
  if (error.headers) res.set(error.headers);
  res.status(error.status).type('application/problem+json').send(JSON.stringify(error.toProblem()));
}

export const notFoundHandler: RequestHandler = (req, res) => {
  sendProblem(res, new ProblemError('route-not-found', `no route for ${req.method} ${req.path}`));
};

interface BodyParserError {
  type?: string;
  status?: number;
  message?: string;
}

/* body-parser reports malformed or oversized bodies with a status and a type. */
function fromBodyParser(err: BodyParserError): ProblemError | null {
  if (typeof err.status !== 'number' || err.status < 400 || err.status >= 500) return null;
  const detail =
    err.type === 'entity.parse.failed'
      ? 'body is not valid JSON'
      : err.type === 'entity.too.large'
        ? 'body is too large'
        : (err.message ?? 'bad request body');
  const kind: ProblemKind =
    err.type === 'entity.too.large'
      ? 'body-too-large'
      : err.status === 415
        ? 'unsupported-media-type'
        : 'invalid-body';
  return new ProblemError(kind, detail, [{ param: 'body', message: detail }]);
}

/** Lookups that found nothing: the answer may be wrong when stores were skipped, so they say which. */
const LOOKUP_MISSES: ReadonlySet<ProblemKind> = new Set(['transaction-not-found', 'event-not-found']);

/** A store file the daemon is not reading, and why (a damaged store, a file that is not one). */
export interface SkippedFile {
  file: string;
  reason: string;
}

function withSkipped(problem: ProblemError, skipped: readonly SkippedFile[]): ProblemError {
  if (!LOOKUP_MISSES.has(problem.kind) || skipped.length === 0) return problem;
  const files = skipped.map((s) => `${s.file} (${s.reason})`).join('; ');
  const detail = `${problem.detail}; but ${skipped.length} store file${skipped.length === 1 ? ' was' : 's were'} skipped, so it may be there: ${files}`;
  return new ProblemError(problem.kind, detail, problem.errors, problem.headers);
}

/** `skipped`: the store files not read now (none from a fleet store), named in the detail of a lookup that found nothing. */
export function errorHandler(
  log: Logger,
  skipped: () => readonly SkippedFile[] = () => [],
): ErrorRequestHandler {
  return (err: unknown, req, res, _next) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const problem =
      err instanceof ProblemError
        ? withSkipped(err, skipped())
        : err instanceof ClickHouseError
          ? // the fleet store (or one of its shards, which the message names) is down or refusing
            new ProblemError('store-unavailable', err.message, undefined, { 'Retry-After': '5' })
          : err instanceof StoreError && err.code === 'E_STORE_CORRUPT'
            ? new ProblemError('store-damaged', err.message)
            : fromBodyParser((err ?? {}) as BodyParserError);
    if (problem) {
      sendProblem(res, problem);
      return;
    }
    log.error('request failed', {
      method: req.method,
      path: req.path,
      error: (err as Error)?.message ?? String(err),
    });
    sendProblem(res, new ProblemError('internal', 'internal error; the daemon log has the details'));
  };
}
