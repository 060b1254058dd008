/**
 * The daemon assembled: stores over the data dir, the replay clock and
 * sessions, the HTTP app, listening. The CLI, the tests and the benchmarks
 * all start it here, so they run the same wiring and shut down in the same order.
 */
import type { Logger } from '../core/log/logger';
import { createApp } from './app';
import { HighResClock, type HighResClockOptions } from './replay/clock/high-res-clock';
import { DEFAULT_SESSION_TTL_SECONDS, ReplaySessions } from './replay/sessions/session-service';
import { listen } from './server';
import { NodeStores } from './store/node-stores';

export interface DaemonOptions {
  dataDir: string;
  log: Logger;
  /** default 127.0.0.1 */
  host?: string;
  /** default 0: the system picks one (see Daemon.url) */
  port?: number;
  /** remove finished and stopped sessions after this long unchanged */
  sessionTtlMs?: number;
  /** false: only the event routes, no replay clock or sessions */
  replay?: boolean;
  clock?: HighResClockOptions;
}

export interface Daemon {
  url: string;
  stores: NodeStores;
  /** present unless options.replay was false */
  replay?: ReplaySessions;
  clock?: HighResClock;
  /** Stops accepting, ends replay streams, finishes requests, then closes the clock and the stores. */
  close(): Promise<void>;
}

export async function createDaemon(options: DaemonOptions): Promise<Daemon> {
  const { log } = options;
  const stores = new NodeStores(options.dataDir, log.child('stores'));
  const clock = options.replay === false ? undefined : new HighResClock(log.child('replay'), options.clock);
  const replay =
    clock &&
    new ReplaySessions({
      dataDir: options.dataDir,
      source: stores,
      clock,
      log: log.child('replay'),
      ttlMs: options.sessionTtlMs ?? DEFAULT_SESSION_TTL_SECONDS * 1000,
    });
  const release = async (): Promise<void> => {
    await replay?.close();
    await clock?.close();
    stores.close();
  };
  let running;
  try {
    // a session played before the clock thread runs would release its first events late, in a burst
    await clock?.ready();
    running = await listen(
      createApp({ log, stores, replay }),
      options.host ?? '127.0.0.1',
      options.port ?? 0,
    );
  } catch (err) {
    await release();
    throw err;
  }
  const server = running;
  return {
    url: server.url,
    stores,
    replay,
    clock,
    close: async () => {
      // replay streams never end by themselves: end them so that the server can close
      const closing = server.close();
      await replay?.close();
      await closing;
      await release();
    },
  };
}
