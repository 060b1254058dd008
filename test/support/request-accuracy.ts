/**
 * Attribution accuracy measured as users would: each request writes files whose names start with
 * its request id (`<id>.<anything>`), so each stored write's target says which request caused it,
 * and its transaction is scored against that: correct, wrong (another request's), none, or
 * missing (not stored by the deadline). Also how tests let the agent's Node hook into the servers
 * they start (the runner opts its own processes out, see jest.config.js).
 */
import { Agent, request } from 'node:http';
import type { ClientHttp2Session, OutgoingHttpHeaders } from 'node:http2';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { basename } from 'node:path';
import { RecordType } from '../../core/model';
import type { AgentProcess } from './agent-process';
import { readStoredEvents, type StoredEvent } from './store-rows';
import { waitFor } from './wait';

export interface Accuracy {
  correct: number;
  wrong: number;
  none: number;
  missing: number;
}

/** A valid W3C traceparent of its own for request n (a head without one carries no transaction). */
export const traceparentOf = (n: number): string =>
  `00-${(n + 1).toString(16).padStart(32, 'b')}-00f067aa0ba902b7-01`;

/** Scores writes by the request id their file name starts with. */
export function scoreWrites(events: StoredEvent[], ids: string[], filesPerRequest: number): Accuracy {
  const known = new Set(ids);
  const s: Accuracy = { correct: 0, wrong: 0, none: 0, missing: 0 };
  for (const e of events) {
    const rid = basename(e.target!).split('.')[0]!;
    if (!known.has(rid)) continue;
    if (e.txn === null) s.none++;
    else if (e.txn === rid) s.correct++;
    else s.wrong++;
  }
  s.missing = ids.length * filesPerRequest - (s.correct + s.wrong + s.none);
  return s;
}

/** The file writes stored under `dir/prefix*`: once `n` are in, or what is there at the deadline. */
export async function writesUnder(
  store: string,
  dir: string,
  prefix: string,
  n: number,
): Promise<StoredEvent[]> {
  const read = () =>
    readStoredEvents(store, `e.type = ${RecordType.SysWrite} AND t.value LIKE '${dir}/${prefix}%'`);
  return waitFor(() => {
    const rows = read();
    return rows.length >= n && rows;
  }, 30_000).catch(() => read());
}

/** Runs `send` for each id, `level` at a time. */
export async function inTurn(
  ids: string[],
  level: number,
  send: (id: string, i: number) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: level }, async () => {
      while (next < ids.length) {
        const i = next++;
        await send(ids[i]!, i);
      }
    }),
  );
}

/** One request on an HTTP/2 session (path `/` unless `headers` names one); resolves with its response body. */
export function h2Request(session: ClientHttp2Session, headers: OutgoingHttpHeaders): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    session
      .request({ ':path': '/', ...headers })
      .setEncoding('utf8')
      .once('error', reject)
      .on('data', (chunk: string) => (body += chunk))
      .once('end', () => resolve(body))
      .end();
  });
}

export interface LoadOptions {
  /** TLS, trusting this certificate */
  ca?: Buffer;
  /** where the server is (default 127.0.0.1; a container's bridge address) */
  host?: string;
  /** each request carries a traceparent of its own (default), else only its x-request-id */
  traced?: boolean;
  path?: string;
  /** a JSON body: the requests are POSTs */
  body?: (id: string) => unknown;
  /** each answer must be 200 with this body (a server that keeps serving right), else the load rejects */
  answer?: string;
  /** requests share connections (default), else each has its own */
  keepAlive?: boolean;
}

/**
 * Requests over keep-alive connections (unless `keepAlive` is false), `level` at a time, each with its x-request-id and (unless
 * `traced` is false) a traceparent of its own.
 */
export async function httpLoad(
  port: number,
  ids: string[],
  level: number,
  { ca, host = '127.0.0.1', traced = true, path = '/', body, answer, keepAlive = true }: LoadOptions = {},
): Promise<void> {
  const pool = ca
    ? new HttpsAgent({ keepAlive, maxSockets: level })
    : new Agent({ keepAlive, maxSockets: level });
  const send = ca ? httpsRequest : request;
  try {
    await inTurn(
      ids,
      level,
      (id, i) =>
        new Promise<void>((resolve, reject) => {
          const json = body && JSON.stringify(body(id));
          send(
            {
              agent: pool,
              host,
              port,
              path,
              ca,
              method: json === undefined ? 'GET' : 'POST',
              headers: {
                'x-request-id': id,
                ...(traced && { traceparent: traceparentOf(i) }),
                ...(json !== undefined && { 'content-type': 'application/json' }),
                // without it Node's agent hands a freed socket to the next request waiting, keepAlive or not
                ...(!keepAlive && { connection: 'close' }),
              },
            },
            (res) => {
              let text = '';
              res.setEncoding('utf8');
              res
                .on('data', (chunk: string) => (text += chunk))
                .once('end', () =>
                  answer === undefined || (res.statusCode === 200 && text === answer)
                    ? resolve()
                    : reject(
                        new Error(`request ${id}: ${res.statusCode} ${JSON.stringify(text.slice(0, 200))}`),
                      ),
                );
            },
          )
            .once('error', reject)
            .end(json);
        }),
    );
  } finally {
    pool.destroy();
  }
}

/** The environment of a child the agent's Node, Python or JVM hook may go into: the test runner's opt-outs removed. */
export function hookableEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.KREPLAY_NODE_HOOK;
  delete env.KREPLAY_PYTHON_HOOK;
  delete env.KREPLAY_JVM_HOOK;
  return env;
}

/** The line the agent logged of `label` process `pid` once it hooked it (`hooked`) or said why not (its reason in it). */
function hookLine(agent: AgentProcess, pid: number, label: string, hooked: string): Promise<string> {
  const pattern = new RegExp(
    `^.*(${hooked}|left a ${label} process unattributed|could not hook a ${label} process).* pid=${pid}\\b.*$`,
    'm',
  );
  return waitFor(() => pattern.exec(agent.output())?.[0], {
    timeoutMs: 20_000,
    what: `the agent's word on ${label} process ${pid}`,
  });
}

/** The line the agent logged of Node process `pid` once it hooked it or said why not (its reason in it). */
export const nodeHookLine = (agent: AgentProcess, pid: number): Promise<string> =>
  hookLine(agent, pid, 'Node', 'hooked a Node process');

/** The line the agent logged of Python process `pid` once it queued its hook or said why not (agent/runtimes/python). */
export const pythonHookLine = (agent: AgentProcess, pid: number): Promise<string> =>
  hookLine(agent, pid, 'Python', 'queued the Python hook');

/** The line the agent logged of JVM process `pid` once it loaded its hook or said why not (agent/runtimes/jvm). */
export const jvmHookLine = (agent: AgentProcess, pid: number): Promise<string> =>
  hookLine(agent, pid, 'JVM', 'loaded the JVM hook');
