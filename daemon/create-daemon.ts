/**
 * The daemon assembled: node stores, the replay clock, the sessions and the
 * HTTP app, listening. The CLI, the tests and the benchmarks all start it
 * here, so they run the same wiring.
 */
import { createLogger, type Logger } from '../core/log/logger';
import { createApp } from './app';
import { HighResClock } from './replay/clock/high-res-clock';
import { DEFAULT_SESSION_TTL_SECONDS, ReplaySessions } from './replay/sessions/session-service';
import { listen } from './server';
import { NodeStores } from './store/node-stores';
import { ClickHouseEvents } from './store/clickhouse-events';
import { ClickHouseHttp, parseClickHouseUrl } from '../core/clickhouse/http-client';

export interface DaemonOptions {
  dataDir: string;
  host?: string;
  /** 0 picks a free port */
  port?: number;
  /** finished and stopped sessions are removed after this long unchanged */
  sessionTtlMs?: number;
  log?: Logger;
  /** serve GET /api/events from this fleet store instead of the node files (clickhouse://HOST:PORT/DB) */
  store?: string;
}

export interface Daemon {
  url: string;
  stores: NodeStores;
  clock: HighResClock;
  replay: ReplaySessions;
  /** Ends the replay streams (they never end by themselves), then closes the server, clock and stores. */
  close(): Promise<void>;
}

export async function createDaemon(options: DaemonOptions): Promise<Daemon> {
  const log = options.log ?? createLogger({ component: 'daemon' });
  const stores = new NodeStores(options.dataDir, log.child('stores'));
  const events =
    options.store === undefined
      ? undefined
      : new ClickHouseEvents(new ClickHouseHttp(parseClickHouseUrl(options.store)));
  const clock = new HighResClock(log.child('replay'));
  const replay = new ReplaySessions({
    dataDir: options.dataDir,
    source: stores,
    clock,
    log: log.child('replay'),
    ttlMs: options.sessionTtlMs ?? DEFAULT_SESSION_TTL_SECONDS * 1000,
  });
  const release = async () => {
    await replay.close();
    await clock.close();
    stores.close();
  };
  try {
    // a session played before the clock thread runs would be released late
    await clock.ready();
    const running = await listen(
      createApp({ log, stores, replay, events }),
      options.host ?? '127.0.0.1',
      options.port ?? 0,
    );
    return {
      url: running.url,
      stores,
      clock,
      replay,
      close: async () => {
        const closing = running.close();
        await replay.close();
        await closing;
        await release();
      },
    };
  } catch (err) {
    await release();
    throw err;
  }
}
