/**
 * Who may do what: reading (GET, HEAD) needs a `read` or `control` token,
 * anything else a `control` token. Liveness and readiness stay open to the
 * host's supervisor. Without tokens the daemon only listens on loopback and
 * instead checks the Host header, so a web page cannot reach it by DNS rebinding.
 */
import type { RequestHandler } from 'express';
import { ProblemError } from '../http/problem';
import { setTokenClient } from './client-name';
import type { Scope } from './token-file';
import type { TokenStore } from './token-store';

export const OPEN_PATHS = new Set(['/healthz', '/readyz']);

const CHALLENGE = 'Bearer realm="kreplay"';

function neededScope(method: string): Scope {
  return method === 'GET' || method === 'HEAD' ? 'read' : 'control';
}

export function requireToken(tokens: TokenStore): RequestHandler {
  return (req, res, next) => {
    if (OPEN_PATHS.has(req.path)) return next();
    const header = req.headers.authorization;
    const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) {
      return next(
        new ProblemError(
          'unauthorized',
          'this daemon needs a bearer token (Authorization: Bearer TOKEN)',
          undefined,
          {
            'WWW-Authenticate': CHALLENGE,
          },
        ),
      );
    }
    const holder = tokens.find(match[1]!);
    if (!holder) {
      return next(
        new ProblemError('unauthorized', 'the bearer token is not one this daemon accepts', undefined, {
          'WWW-Authenticate': `${CHALLENGE}, error="invalid_token"`,
        }),
      );
    }
    const scope = neededScope(req.method);
    if (scope === 'control' && holder.scope !== 'control') {
      return next(
        new ProblemError(
          'forbidden',
          `${req.method} ${req.path} needs a control token; ${holder.name} has read`,
        ),
      );
    }
    setTokenClient(res, holder.name);
    next();
  };
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1', '[::1]'];

/** The Host header's name without its port, lower-cased. */
function hostName(header: string): string {
  const name = header.startsWith('[')
    ? header.slice(0, header.indexOf(']') + 1)
    : header.replace(/:\d+$/, '');
  return name.toLowerCase();
}

export function isLoopbackHost(host: string): boolean {
  return LOOPBACK_NAMES.includes(host.toLowerCase()) || /^127(\.\d{1,3}){3}$/.test(host);
}

/** Refuses requests whose Host is not one of the daemon's own names. */
export function checkHost(ownNames: readonly string[]): RequestHandler {
  const allowed = new Set([...LOOPBACK_NAMES, ...ownNames.map((n) => n.toLowerCase())]);
  return (req, _res, next) => {
    const header = req.headers.host;
    if (header !== undefined && allowed.has(hostName(header))) return next();
    next(
      new ProblemError(
        'host-not-allowed',
        `Host ${JSON.stringify(header ?? '')} is not one of this daemon's names (${[...allowed].join(', ')}); add it with --allowed-host`,
      ),
    );
  };
}

/**
 * Refuses an absolute-form request target (`GET http://elsewhere/api/events`): a proxy's form, never
 * a client's of this daemon, and one whose host part the Host check would not see.
 */
export const originFormOnly: RequestHandler = (req, _res, next) => {
  if (req.url.startsWith('/')) return next();
  next(
    new ProblemError(
      'malformed-request',
      `the request target ${JSON.stringify(req.url.slice(0, 200))} is not a path: send the path alone`,
    ),
  );
};

/**
 * Refuses a request that changes state (not GET or HEAD) sent by a page of another origin: a
 * browser sends such a POST without asking first when it has no body (`POST …/play`), and
 * names the page's origin in Origin. The daemon's own page has the daemon's origin.
 */
export const sameOriginWrites: RequestHandler = (req, _res, next) => {
  const origin = req.headers.origin;
  if (origin === undefined || req.method === 'GET' || req.method === 'HEAD') return next();
  let host: string | null = null;
  try {
    host = new URL(origin).host.toLowerCase();
  } catch {
    // "null" (a sandboxed page, a file) and anything unparsable are no origin of the daemon's
  }
  if (host !== null && host === (req.headers.host ?? '').toLowerCase()) return next();
  next(
    new ProblemError(
      'origin-not-allowed',
      `${req.method} ${req.path} from a page of ${JSON.stringify(origin)}, not this daemon's own origin, is refused`,
    ),
  );
};
