/**
 * ClickHouse over its HTTP interface with Node's fetch: enough for DDL,
 * gzip-compressed JSONEachRow inserts and JSONEachRow reads, on 18.16 and
 * current releases alike. 64-bit integers come back quoted
 * (output_format_json_quote_64bit_integers) so nanoseconds stay exact.
 */
import { gzipSync } from 'node:zlib';
import { KreplayError } from '../errors';

export type ClickHouseErrorCode =
  'E_CLICKHOUSE_URL' | 'E_CLICKHOUSE_DOWN' | 'E_CLICKHOUSE_REFUSED' | 'E_CLICKHOUSE_SCHEMA';

export class ClickHouseError extends KreplayError {
  declare readonly code: ClickHouseErrorCode;
  constructor(code: ClickHouseErrorCode, message: string, options?: ErrorOptions) {
    super(code, message, options);
  }
}

export interface ClickHouseEndpoint {
  host: string;
  port: number;
  database: string;
  user?: string;
  password?: string;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** clickhouse://HOST:PORT/DB (the HTTP port); the database name is an identifier. */
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
  return { host: url.hostname, port: Number(url.port), database };
}

export class ClickHouseHttp {
  constructor(
    readonly endpoint: ClickHouseEndpoint,
    private readonly timeoutMs = 30_000,
  ) {}

  get name(): string {
    return `${this.endpoint.host}:${this.endpoint.port}`;
  }

  /** Runs `sql`; `rows` (JSONEachRow lines) go gzip-compressed as the statement's data. */
  async exec(sql: string, rows?: string, database: string | null = this.endpoint.database): Promise<string> {
    const params = new URLSearchParams({ output_format_json_quote_64bit_integers: '1' });
    if (database) params.set('database', database);
    const headers: Record<string, string> = {};
    if (this.endpoint.user) headers['X-ClickHouse-User'] = this.endpoint.user;
    if (this.endpoint.password) headers['X-ClickHouse-Key'] = this.endpoint.password;
    let body: Buffer;
    if (rows === undefined) body = Buffer.from(sql);
    else {
      params.set('query', sql);
      headers['Content-Encoding'] = 'gzip';
      body = gzipSync(rows, { level: 1 });
    }
    let response: Response;
    try {
      response = await fetch(`http://${this.name}/?${params}`, {
        method: 'POST',
        headers,
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new ClickHouseError(
        'E_CLICKHOUSE_DOWN',
        `ClickHouse at ${this.name} unreachable: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    const text = await response.text();
    if (!response.ok)
      throw new ClickHouseError(
        'E_CLICKHOUSE_REFUSED',
        `ClickHouse at ${this.name} refused (${response.status}): ${text.trim().slice(0, 500)}`,
      );
    return text;
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
