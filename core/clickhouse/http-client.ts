/**
 * ClickHouse over its HTTP interface (node:http): enough for DDL,
 * compressed inserts (gzip bodies, or LZ4 in ClickHouse's own block framing)
 * and JSONEachRow reads, on 18.16 and current releases alike. 64-bit integers come back quoted
 * (output_format_json_quote_64bit_integers) so nanoseconds stay exact.
 */
import { randomUUID } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import { KreplayError } from '../errors';
import { quoteString } from './quote';

export type ClickHouseErrorCode =
  'E_CLICKHOUSE_URL' | 'E_CLICKHOUSE_DOWN' | 'E_CLICKHOUSE_REFUSED' | 'E_CLICKHOUSE_SCHEMA';

export class ClickHouseError extends KreplayError {
  declare readonly code: ClickHouseErrorCode;
  constructor(code: ClickHouseErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

/**
 * How an insert's rows travel: `lz4` in ClickHouse's compressed blocks (`decompress=1`; the
 * shipper frames them natively, native/sqlite/kreplay_clickhouse_lz4.c), `gzip` level 1 as the
 * body's Content-Encoding, or `none`. 18.16 takes no other (not br, not zstd).
 */
export const INSERT_CODECS = ['lz4', 'gzip', 'none'] as const;
export type InsertCodec = (typeof INSERT_CODECS)[number];
/** the shipper's codec unless the URL names one: the least agent CPU per event (bench/RESULTS.md, issue 27) */
export const DEFAULT_SHIP_CODEC: InsertCodec = 'lz4';

/** An insert's rows already in their codec's bytes (`lz4`: framed), or to be compressed (`gzip`). */
export interface EncodedRows {
  codec: InsertCodec;
  bytes: Uint8Array;
}

export interface ClickHouseEndpoint {
  host: string;
  port: number;
  database: string;
  user?: string;
  password?: string;
  /** a `remote_servers` cluster: events go to and are read from a Distributed table over its shards */
  cluster?: string;
  /** how long one request may take before it fails (default 30 s) */
  timeoutMs?: number;
  /** how the shipper's inserts travel (default DEFAULT_SHIP_CODEC) */
  compression?: InsertCodec;
}

/** The settings a clickhouse:// URL may carry after `?`. */
const URL_SETTINGS = ['cluster', 'timeout', 'compression'];

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * clickhouse://HOST:PORT/DB[?cluster=NAME][&timeout=SECONDS][&compression=lz4|gzip|none]
 * (the HTTP port); the database and cluster names are identifiers.
 */
export function parseClickHouseUrl(spec: string): ClickHouseEndpoint {
  let url: URL;
  try {
    url = new URL(spec);
  } catch {
    throw new ClickHouseError(
      'E_CLICKHOUSE_URL',
      `${JSON.stringify(spec)} is not a URL; expected clickhouse://HOST:PORT/DB`,
    );
  }
  const database = url.pathname.replace(/^\//, '');
  if (url.protocol !== 'clickhouse:' || !url.hostname || !url.port || !IDENTIFIER.test(database))
    throw new ClickHouseError(
      'E_CLICKHOUSE_URL',
      `${JSON.stringify(spec)}: expected clickhouse://HOST:PORT/DB with the HTTP port and a database name of letters, digits and _`,
    );
  if (url.username || url.password)
    throw new ClickHouseError(
      'E_CLICKHOUSE_URL',
      'put the user in --ship-user and the password in a file or the environment, not in the URL',
    );
  const endpoint: ClickHouseEndpoint = { host: url.hostname, port: Number(url.port), database };
  for (const [key, value] of url.searchParams) {
    if (!URL_SETTINGS.includes(key))
      throw new ClickHouseError(
        'E_CLICKHOUSE_URL',
        `${JSON.stringify(spec)}: unknown setting ${JSON.stringify(key)}; a clickhouse:// URL takes ${URL_SETTINGS.join(', ')}`,
      );
    if (key === 'cluster') {
      if (!IDENTIFIER.test(value))
        throw new ClickHouseError(
          'E_CLICKHOUSE_URL',
          `${JSON.stringify(spec)}: cluster must be a remote_servers name of letters, digits and _`,
        );
      endpoint.cluster = value;
    } else if (key === 'compression') {
      if (!(INSERT_CODECS as readonly string[]).includes(value))
        throw new ClickHouseError(
          'E_CLICKHOUSE_URL',
          `${JSON.stringify(spec)}: compression must be ${INSERT_CODECS.join(', ')}`,
        );
      endpoint.compression = value as InsertCodec;
    } else {
      const seconds = Number(value);
      if (!(seconds > 0 && seconds <= 3600))
        throw new ClickHouseError(
          'E_CLICKHOUSE_URL',
          `${JSON.stringify(spec)}: timeout must be a number of seconds above 0, at most 3600`,
        );
      endpoint.timeoutMs = Math.round(seconds * 1000);
    }
  }
  return endpoint;
}

export const DEFAULT_CLICKHOUSE_TIMEOUT_MS = 30_000;

/** What a request on a connection the server already closed fails with. */
const STALE_SOCKET = ['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET'];

/** The system error code of a failed request (ECONNREFUSED, ECONNRESET…), if any. */
function errorCode(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? code : '';
}

export class ClickHouseHttp {
  /** how long one request may take */
  readonly timeoutMs: number;
  /**
   * node:http on kept-alive connections, not fetch: a batch's body goes to the socket as it is,
   * where fetch's streams cost the shipper CPU (and garbage) in proportion to its bytes
   */
  private readonly agent = new HttpAgent({ keepAlive: true });

  constructor(
    readonly endpoint: ClickHouseEndpoint,
    timeoutMs?: number,
  ) {
    this.timeoutMs = endpoint.timeoutMs ?? timeoutMs ?? DEFAULT_CLICKHOUSE_TIMEOUT_MS;
  }

  private authHeaders(): Record<string, string> {
    const headers: Record<string, string> = {};
    if (this.endpoint.user) headers['X-ClickHouse-User'] = this.endpoint.user;
    if (this.endpoint.password) headers['X-ClickHouse-Key'] = this.endpoint.password;
    return headers;
  }

  get name(): string {
    return `${this.endpoint.host}:${this.endpoint.port}`;
  }

  /** Runs `sql`; `rows` (in the statement's FORMAT) go as its data, gzip-compressed unless encoded. */
  async exec(
    sql: string,
    rows?: string | Uint8Array | EncodedRows,
    database: string | null = this.endpoint.database,
    timeout = this.timeoutMs,
  ): Promise<string> {
    // whole ms, as AbortSignal.timeout takes: a deadline left on performance.now()'s clock (the ship
    // loop's stop flush) is fractional, and threw a RangeError before anything was sent
    const timeoutMs = Math.max(0, Math.ceil(timeout));
    // a deadline already past is not sent: a 0 ms timer fires after the loop's next turn, and a
    // loopback answer could beat it, so whether it was kept would be a race
    if (timeoutMs === 0)
      throw new ClickHouseError(
        'E_CLICKHOUSE_DOWN',
        `ClickHouse at ${this.name} unreachable: no answer in 0 ms`,
      );
    const queryId = randomUUID();
    const params = new URLSearchParams({ output_format_json_quote_64bit_integers: '1', query_id: queryId });
    if (database) params.set('database', database);
    if (this.endpoint.cluster) {
      // an insert is acknowledged once every shard has its rows, not when the entry server queued them;
      // a shard that stopped answering (SIGSTOP, a dead host) fails the query instead of holding it for minutes
      const seconds = String(Math.max(1, Math.floor(timeoutMs / 1000)));
      params.set('insert_distributed_sync', '1');
      params.set('connect_timeout_with_failover_ms', '1000');
      params.set('receive_timeout', seconds);
      params.set('send_timeout', seconds);
    }
    const headers = this.authHeaders();
    let body: Buffer;
    if (rows === undefined) body = Buffer.from(sql);
    else {
      params.set('query', sql);
      const { codec, bytes } =
        typeof rows === 'string' || rows instanceof Uint8Array ? { codec: 'gzip', bytes: rows } : rows;
      if (codec === 'gzip') {
        headers['Content-Encoding'] = 'gzip';
        body = gzipSync(bytes, { level: 1 });
      } else {
        if (codec === 'lz4') params.set('decompress', '1');
        body =
          typeof bytes === 'string'
            ? Buffer.from(bytes)
            : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      }
    }
    let reply: { status: number; text: string };
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      try {
        reply = await this.post(params, headers, body, signal);
      } catch (err) {
        // a kept-alive connection the server closed meanwhile (its keep_alive_timeout is 3 s);
        // sending again is safe: DDL is IF NOT EXISTS and a re-sent batch collapses (schema.ts)
        if (signal.aborted || !STALE_SOCKET.includes(errorCode(err))) throw err;
        reply = await this.post(params, headers, body, signal);
      }
    } catch (err) {
      if (signal.aborted) this.killQuery(queryId);
      const code = errorCode(err);
      const why = signal.aborted ? `no answer in ${timeoutMs} ms` : (err as Error).message;
      throw new ClickHouseError(
        'E_CLICKHOUSE_DOWN',
        `ClickHouse at ${this.name} unreachable: ${why}${code && !why.includes(code) ? ` (${code})` : ''}`,
        { cause: err },
      );
    }
    const text = reply.text;
    if (reply.status !== 200)
      throw new ClickHouseError(
        'E_CLICKHOUSE_REFUSED',
        `ClickHouse at ${this.name} refused (${reply.status}): ${text.trim().slice(0, 500)}`,
      );
    return text;
  }

  /** One POST on this client's kept-alive connections: the status and the body as text. */
  private post(
    params: URLSearchParams,
    headers: Record<string, string>,
    body: Buffer,
    signal: AbortSignal,
  ): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const request = httpRequest(
        {
          host: this.endpoint.host,
          port: this.endpoint.port,
          path: `/?${params}`,
          method: 'POST',
          headers: { ...headers, 'Content-Length': String(body.length) },
          agent: this.agent,
          signal,
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () =>
            resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
          );
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  }

  /** Asks the server to give up a query we stopped waiting for, so hung ones do not pile up there. */
  private killQuery(queryId: string): void {
    const params = new URLSearchParams({
      query: `KILL QUERY WHERE query_id = ${quoteString(queryId)} ASYNC`,
    });
    // best effort: the server may be what hangs
    this.post(params, this.authHeaders(), Buffer.alloc(0), AbortSignal.timeout(this.timeoutMs)).catch(
      () => undefined,
    );
  }

  /** Rows of a SELECT, each a JSON object (64-bit integers as strings). */
  async rows<T = Record<string, unknown>>(sql: string): Promise<T[]> {
    const text = await this.exec(`${sql} FORMAT JSONEachRow`);
    return text
      .split('\n')
      .filter((line) => line)
      .map((line) => JSON.parse(line) as T);
  }
}
