/** JSON requests to the daemon; a failure becomes an Error whose message shows the problem the daemon sent. */
import { request as requestHttp, type IncomingMessage } from 'node:http';
import { request as requestHttps } from 'node:https';
import type { Problem } from '../daemon/http/problem';

/** The lines a problem+json answer (or any other failed answer) prints as. */
export function problemText(status: number, text: string): string {
  let problem: Partial<Problem>;
  try {
    problem = JSON.parse(text) as Partial<Problem>;
  } catch {
    return `server answered ${status}: ${text.slice(0, 200)}`;
  }
  const errors = (problem.errors ?? []).map((e) => `\n  ${e.param}: ${e.message}`);
  return `server answered ${status} ${problem.title ?? ''}: ${problem.detail ?? ''}${errors.join('')}`;
}

/**
 * The Authorization header for a daemon started with --tokens: the token comes
 * from KREPLAY_TOKEN, never from a flag (flags show in `ps`).
 */
export function authHeaders(): Record<string, string> {
  const token = process.env.KREPLAY_TOKEN;
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** An error reaching the daemon at all, said plainly. */
export function unreachable(url: string, err: unknown): Error {
  const cause = (err as { cause?: Error }).cause ?? (err as Error);
  return new Error(`cannot reach ${new URL(url).origin}: ${cause.message}`, { cause: err });
}

export async function requestJson<T>(method: string, url: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      body: body === undefined ? undefined : JSON.stringify(body),
      headers: { ...authHeaders(), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    });
  } catch (err) {
    throw unreachable(url, err);
  }
  const text = await res.text();
  if (!res.ok) throw new Error(problemText(res.status, text));
  return JSON.parse(text) as T;
}

/**
 * A POST over node:http (`body` sent as JSON), its answer parsed as JSON. A
 * replay's play is answered a moment (LEAD_NS, 5 ms) before its first event:
 * fetch spent 2-4 ms of the client's CPU taking that answer (web streams, the
 * Response), time the event loop then did not read the stream, so a play's
 * first event reached the user later than every other; this costs a third,
 * once this code has run before (`kreplay replay` creates its session with it).
 */
export function postJson<T>(url: string, body?: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const send = url.startsWith('https:') ? requestHttps : requestHttp;
    const headers: Record<string, string> = authHeaders();
    if (body !== undefined) headers['content-type'] = 'application/json';
    const req = send(url, { method: 'POST', headers }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', (err) => reject(unreachable(url, err)));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) return reject(new Error(problemText(status, text)));
        try {
          resolve(JSON.parse(text) as T);
        } catch (err) {
          reject(err as Error);
        }
      });
    });
    req.on('error', (err) => reject(unreachable(url, err)));
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}
