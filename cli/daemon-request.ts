/** JSON requests to the daemon; a failure becomes an Error whose message shows the problem the daemon sent. */
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
