/**
 * Request attribution measured as users would: each request names the files it writes by its
 * x-request-id, so each stored write's target says which request caused it, and its transaction
 * is correct, wrong (another request's) or none; a write not stored is missing.
 */
import { Agent, request } from 'node:http';
import { RecordType } from '../../core/model';
import { readStoredEvents, type StoredEvent } from './store-rows';
import { waitFor } from './wait';

export interface Score {
  correct: number;
  wrong: number;
  none: number;
  missing: number;
}

let traced = 0;
/** A fresh valid W3C traceparent: a request head without one carries no transaction. */
export const traceparent = (): string =>
  `00-${(++traced).toString(16).padStart(32, 'b')}-00f067aa0ba902b7-01`;

/**
 * GETs / once per id, `level` at a time over as many keep-alive connections, each with its
 * x-request-id and a traceparent; rejects unless every answer is 200 with body `body`.
 */
export async function sendRequests(port: number, ids: string[], level: number, body = 'ok'): Promise<void> {
  const pool = new Agent({ keepAlive: true, maxSockets: level });
  const get = (rid: string) =>
    new Promise<void>((resolve, reject) => {
      request(
        {
          agent: pool,
          host: '127.0.0.1',
          port,
          path: '/',
          headers: { 'x-request-id': rid, traceparent: traceparent() },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res
            .on('data', (chunk: string) => (text += chunk))
            .once('end', () => {
              if (res.statusCode === 200 && text === body) resolve();
              else
                reject(new Error(`request ${rid}: ${res.statusCode} ${JSON.stringify(text.slice(0, 200))}`));
            });
        },
      )
        .once('error', reject)
        .end();
    });
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: level }, async () => {
        while (next < ids.length) await get(ids[next++]!);
      }),
    );
  } finally {
    pool.destroy();
  }
}

/** The stored writes of files `<dir>/<prefix>…`, once `n` are stored or, after the deadline, those that are. */
export async function storedWrites(
  store: string,
  dir: string,
  prefix: string,
  n: number,
): Promise<StoredEvent[]> {
  const rows = () =>
    readStoredEvents(store, `e.type = ${RecordType.SysWrite} AND t.value LIKE '${dir}/${prefix}%'`);
  return waitFor(() => {
    const found = rows();
    return found.length >= n && found;
  }, 30_000).catch(() => rows());
}

/** The request a file belongs to: its name up to the first dot (`<id>.loop`, `<id>.s2`). */
const requestOf = (target: string) => target.slice(target.lastIndexOf('/') + 1).split('.')[0]!;

/** Scores the writes of requests `ids`, `filesPerRequest` each. */
export function scoreWrites(events: StoredEvent[], ids: string[], filesPerRequest: number): Score {
  const s: Score = { correct: 0, wrong: 0, none: 0, missing: ids.length * filesPerRequest - events.length };
  for (const e of events) {
    if (e.txn === null) s.none++;
    else if (e.txn === requestOf(e.target!)) s.correct++;
    else s.wrong++;
  }
  return s;
}

/** The goal: at least 99.9% correct, none wrong, none missing. */
export function meetsGoal(s: Score, total: number): boolean {
  return s.correct >= 0.999 * total && s.wrong === 0 && s.missing === 0;
}

export const formatScore = (s: Score): string => `${s.correct}/${s.wrong}/${s.none}/${s.missing}`;
