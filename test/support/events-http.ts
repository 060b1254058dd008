/** The daemon's HTTP app over a data dir, on 127.0.0.1 port 0, and a client for its event routes. */
import { silentLogger } from '../../core/log/logger';
import type { ApiEvent } from '../../core/model';
import { createApp } from '../../daemon/app';
import { listen } from '../../daemon/server';
import { NodeStores } from '../../daemon/store/node-stores';
import { ClickHouseEvents } from '../../daemon/store/clickhouse-events';
import { clickhouseAvailable, shipDataDir, TestClickHouse } from './clickhouse-server';

/** Where the events routes read: the node files, or the same files shipped to a ClickHouse server. */
export type EventsBackend = { kind: 'sqlite' } | { kind: 'clickhouse'; server: () => TestClickHouse };

let databases = 0;

/** A fresh database name on the test's ClickHouse server. */
export function freshDatabase(prefix: string): string {
  return `${prefix}_${process.pid}_${++databases}`;
}

/**
 * The backends a test file runs against: the node files, and (when
 * clickhouse-server is installed) the same files shipped to a ClickHouse
 * server this file starts once. Call at the top of the file; describe.each the list.
 */
export function useEventsBackends(): EventsBackend[] {
  let clickhouse: TestClickHouse | undefined;
  const backends: EventsBackend[] = [{ kind: 'sqlite' }];
  if (clickhouseAvailable) backends.push({ kind: 'clickhouse', server: () => clickhouse! });
  else console.warn('SKIPPED: the ClickHouse backend runs (clickhouse-server is not installed)');
  beforeAll(async () => {
    if (!clickhouseAvailable) return;
    clickhouse = await TestClickHouse.create();
    await clickhouse.start();
  }, 60_000);
  afterAll(async () => {
    await clickhouse?.destroy();
  });
  return backends;
}

export interface EventsServer {
  url: string;
  /** Ships what the node files gained since (ClickHouse); nothing to do for the node files themselves. */
  sync(): Promise<void>;
  close(): Promise<void>;
}

export async function startEventsServer(
  dataDir: string,
  backend: EventsBackend = { kind: 'sqlite' },
): Promise<EventsServer> {
  const stores = new NodeStores(dataDir, silentLogger);
  let events: ClickHouseEvents | undefined;
  let sync = () => Promise.resolve();
  if (backend.kind === 'clickhouse') {
    const ch = backend.server().client(freshDatabase('api'));
    sync = () => shipDataDir(dataDir, ch);
    await sync();
    events = new ClickHouseEvents(ch);
  }
  const app = createApp({ log: silentLogger, stores, events, fleetStore: events !== undefined });
  const running = await listen(app, '127.0.0.1', 0);
  return {
    url: running.url,
    sync,
    close: async () => {
      await running.close();
      stores.close();
    },
  };
}

export interface Reply {
  status: number;
  contentType: string;
  text: string;
}

export async function get(url: string): Promise<Reply> {
  const res = await fetch(url);
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text: await res.text() };
}

/** A binary answer (an incident file). */
export async function getBytes(url: string): Promise<{ status: number; contentType: string; body: Buffer }> {
  const res = await fetch(url);
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', body };
}

export interface EventsReply {
  events: ApiEvent[];
  next_cursor: string | null;
}

/** A body fetched with int64=string, its integers made bigint again. */
export function readEvents(text: string): EventsReply {
  const body = JSON.parse(text) as EventsReply;
  return { ...body, events: body.events.map(exactEvent) };
}

export function exactEvent(event: ApiEvent): ApiEvent {
  return { ...event, timestamp_ns: BigInt(event.timestamp_ns), duration_ns: BigInt(event.duration_ns) };
}

/** Follows next_cursor to the end; `between` runs after each page (to insert meanwhile). */
export async function fetchAllPages(
  base: string,
  query: string,
  between: (page: number) => unknown = () => undefined,
): Promise<ApiEvent[]> {
  const events: ApiEvent[] = [];
  let cursor: string | null = null;
  for (let page = 0; ; page++) {
    const reply = await get(`${base}/api/events?int64=string&${query}${cursor ? `&cursor=${cursor}` : ''}`);
    if (reply.status !== 200) throw new Error(`page ${page}: ${reply.status} ${reply.text}`);
    const body = readEvents(reply.text);
    events.push(...body.events);
    if (!body.next_cursor) return events;
    cursor = body.next_cursor;
    await Promise.resolve(between(page));
  }
}
