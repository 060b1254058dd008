/**
 * Every kind of problem the daemon's HTTP API answers with: its stable `type` URI
 * suffix, status and title. A client tells "no such session" from "no such
 * route" by the type (or the `code`), never by the status alone.
 */
export const PROBLEM_KINDS = {
  'invalid-parameter': { status: 400, title: 'Bad Request' },
  // a request Node's parser refuses (bad framing), or an absolute-form target (`GET http://host/path`)
  'malformed-request': { status: 400, title: 'Bad Request' },
  'invalid-body': { status: 400, title: 'Bad Request' },
  // an uploaded incident file that is truncated, damaged, newer or not one: the detail says which
  'invalid-incident': { status: 400, title: 'Bad Request' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  'host-not-allowed': { status: 403, title: 'Forbidden' },
  // a state-changing request from a page of another origin (its Origin header is not the daemon's)
  'origin-not-allowed': { status: 403, title: 'Forbidden' },
  'route-not-found': { status: 404, title: 'Not Found' },
  'event-not-found': { status: 404, title: 'Not Found' },
  'session-not-found': { status: 404, title: 'Not Found' },
  'transaction-not-found': { status: 404, title: 'Not Found' },
  'invalid-state': { status: 409, title: 'Conflict' },
  'body-too-large': { status: 413, title: 'Content Too Large' },
  'export-too-large': { status: 413, title: 'Content Too Large' },
  'unsupported-media-type': { status: 415, title: 'Unsupported Media Type' },
  // a request head over Node's 16 KiB
  'headers-too-large': { status: 431, title: 'Request Header Fields Too Large' },
  'too-many-sessions': { status: 429, title: 'Too Many Requests' },
  // incident uploads under way: their number or their bytes are at the daemon's bound
  'too-many-uploads': { status: 429, title: 'Too Many Requests' },
  'shutting-down': { status: 503, title: 'Service Unavailable' },
  'store-unavailable': { status: 503, title: 'Service Unavailable' },
  // --max-streams or --max-streams-per-client reached
  'too-many-streams': { status: 503, title: 'Service Unavailable' },
  // the query workers' queue is full (--max-queued-queries)
  'too-busy': { status: 503, title: 'Service Unavailable' },
  // a query ran past --query-timeout
  'query-timeout': { status: 503, title: 'Service Unavailable' },
  // every query worker died and is waiting to be started again
  'query-workers-down': { status: 503, title: 'Service Unavailable' },
  // a node store SQLite found damaged mid-read: the detail names the file; later queries skip it
  'store-damaged': { status: 500, title: 'Internal Server Error' },
  internal: { status: 500, title: 'Internal Server Error' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemKind = keyof typeof PROBLEM_KINDS;

export const PROBLEM_TYPE_BASE = 'https://kreplay.dev/problems/';

type Underscored<S extends string> = S extends `${infer Head}-${infer Tail}`
  ? `${Head}_${Underscored<Tail>}`
  : S;
/** The error code of each problem kind (core/error-codes.ts registers them with the rest). */
export type ProblemCode = `E_${Uppercase<Underscored<ProblemKind>>}`;

/** `session-not-found` → `E_SESSION_NOT_FOUND`: the code that goes with a kind. */
export function problemCode(kind: ProblemKind): ProblemCode {
  return `E_${kind.toUpperCase().replace(/-/g, '_')}` as ProblemCode;
}
