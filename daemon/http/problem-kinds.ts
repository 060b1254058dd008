/**
 * The kinds of HTTP problem the daemon answers with: each has a stable `type`
 * URI (so a client can tell "no such session" from "no such route" without
 * reading prose), its status and its error `code`. This table is their one owner.
 */
export const PROBLEM_KINDS = {
  'invalid-parameter': { status: 400, code: 'E_INVALID_PARAMETER' },
  'invalid-body': { status: 400, code: 'E_INVALID_BODY' },
  'route-not-found': { status: 404, code: 'E_ROUTE_NOT_FOUND' },
  'event-not-found': { status: 404, code: 'E_EVENT_NOT_FOUND' },
  'session-not-found': { status: 404, code: 'E_SESSION_NOT_FOUND' },
  'transaction-not-found': { status: 404, code: 'E_TRANSACTION_NOT_FOUND' },
  'invalid-session-state': { status: 409, code: 'E_SESSION_STATE' },
  'body-too-large': { status: 413, code: 'E_BODY_TOO_LARGE' },
  'unsupported-body-encoding': { status: 415, code: 'E_BODY_ENCODING' },
  'too-many-sessions': { status: 429, code: 'E_TOO_MANY_SESSIONS' },
  internal: { status: 500, code: 'E_INTERNAL' },
  'shutting-down': { status: 503, code: 'E_SHUTTING_DOWN' },
} as const satisfies Record<string, { status: number; code: string }>;

export type ProblemKind = keyof typeof PROBLEM_KINDS;

export const PROBLEM_TYPE_BASE = 'https://kreplay.dev/problems/';

export function problemType(kind: ProblemKind): string {
  return PROBLEM_TYPE_BASE + kind;
}
