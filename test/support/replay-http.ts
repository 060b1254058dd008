/** The daemon's HTTP app with real replay sessions (real stores, high-resolution clock), and a stream client. */
import { silentLogger } from '../../core/log/logger';
import { openEventStream, type EventStream, type SseMessage } from '../../cli/sse-client';
import { createDaemon, type DaemonOptions } from '../../daemon/create-daemon';
import type { ReplaySessions } from '../../daemon/replay/sessions/session-service';
import type { NodeStores } from '../../daemon/store/node-stores';
import type { ClickHouseHttp } from '../../core/clickhouse/http-client';
import { shipDataDir } from './clickhouse-server';
import { freshDatabase, type EventsBackend } from './events-http';
import { waitFor } from './wait';

export interface ReplayServer {
  url: string;
  replay: ReplaySessions;
  /** the daemon's own node stores (its main thread's) */
  stores: NodeStores;
  /** the ClickHouse database it reads, when it reads one */
  fleet?: ClickHouseHttp;
  close(): Promise<void>;
}

/** Sessions' limits and TTLs as the daemon's options name them; ended sessions stay 10 min unless told. */
export type SessionLimits = Pick<
  DaemonOptions,
  | 'sessionTtlMs'
  | 'idleSessionTtlMs'
  | 'maxSessions'
  | 'maxSessionsPerClient'
  | 'wallClock'
  | 'maxQueuedQueries'
>;

/** A daemon over `dataDir`, reading its events (replay included) from the node files or from them shipped to ClickHouse. */
export async function startReplayServer(
  dataDir: string,
  limits: SessionLimits = {},
  backend: EventsBackend = { kind: 'sqlite' },
): Promise<ReplayServer> {
  let store: string | undefined;
  let fleet: ClickHouseHttp | undefined;
  if (backend.kind === 'clickhouse') {
    const server = backend.server();
    const database = freshDatabase('replay');
    fleet = server.client(database);
    await shipDataDir(dataDir, fleet);
    store = `clickhouse://127.0.0.1:${server.httpPort}/${database}`;
  }
  const daemon = await createDaemon({ dataDir, store, sessionTtlMs: 600_000, ...limits, log: silentLogger });
  return {
    url: daemon.url,
    replay: daemon.replay,
    stores: daemon.stores,
    fleet,
    close: () => daemon.close(),
  };
}

export interface Reply {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

/** A JSON request to the replay routes. */
export async function api(base: string, method: string, path: string, body?: unknown): Promise<Reply> {
  const res = await fetch(`${base}/api/replay/sessions${path}`, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : {} };
}

export interface Received extends SseMessage {
  /** process.hrtime.bigint() when it arrived */
  at: bigint;
}

/** A session's event stream, read in the background. */
export class StreamClient {
  readonly received: Received[] = [];
  ended = false;
  private wake: () => void = () => undefined;

  private constructor(private readonly stream: EventStream) {
    void this.read();
  }

  static async open(base: string, id: string, lastEventId?: number): Promise<StreamClient> {
    const url = `${base}/api/replay/sessions/${id}/events`;
    return new StreamClient(await openEventStream(url, lastEventId?.toString()));
  }

  private async read(): Promise<void> {
    try {
      for await (const message of this.stream.messages) {
        this.received.push({ ...message, at: process.hrtime.bigint() });
        this.wake();
      }
    } catch {
      // closed
    }
    this.ended = true;
    this.wake();
  }

  replays(): Received[] {
    return this.received.filter((m) => m.event === 'replay');
  }

  states(): string[] {
    return this.received.filter((m) => m.event === 'state').map((m) => JSON.parse(m.data).state as string);
  }

  /** Resolves once `done` holds (checked on each message), or rejects after `timeoutMs`. */
  async until(done: (stream: StreamClient) => boolean, timeoutMs = 30_000): Promise<void> {
    await waitFor(
      () => {
        if (done(this)) return true;
        if (this.ended) throw new Error(`stream ended before the condition held: ${this.states().join(',')}`);
        return false;
      },
      {
        timeoutMs,
        what: () =>
          `the stream's condition (${this.replays().length} events so far, states ${this.states()})`,
        changed: () => new Promise<void>((resolve) => (this.wake = resolve)),
      },
    );
  }

  close(): void {
    this.stream.close();
  }
}
