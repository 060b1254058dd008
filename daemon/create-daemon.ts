/**
 * The daemon assembled: node stores, the replay clock, the sessions and the
 * HTTP app, listening. The CLI, the tests and the benchmarks all start it
 * here, so they run the same wiring.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../core/repo-root';
import { createLogger, type Logger } from '../core/log/logger';
import { createApp } from './app';
import { DaemonMetrics } from './metrics/daemon-metrics';
import { HighResClock } from './replay/clock/high-res-clock';
import { MemoryTrim } from './http/memory-trim';
import { ReplaySessions } from './replay/sessions/session-service';
import { DEFAULT_SESSION_TTL_SECONDS } from './replay/sessions/session-limits';
import type { WallClock } from './replay/sessions/wall-clock';
import { KreplayError } from '../core/errors';
import { isLoopbackHost } from './auth/auth-middleware';
import { TokenStore } from './auth/token-store';
import { listen, type TlsFiles } from './server';
import { NodeStores } from './store/node-stores';
import { IncidentThread } from './incidents/incident-thread';

/** How often the incidents folders are looked at for new, changed or removed files. */
const INCIDENT_RESCAN_MS = 2000;
import { ClickHouseEvents } from './store/clickhouse-events';
import { fleetFirstReader } from './store/fleet-first-reader';
import { storeTransactionReader } from './replay/transaction-reader';
import { QueryPool } from './queries/query-pool';
import { StreamLimits } from './replay/stream/stream-limits';
import { ClickHouseHttp, parseClickHouseUrl } from '../core/clickhouse/http-client';

export interface DaemonOptions {
  dataDir: string;
  host?: string;
  /** 0 picks a free port */
  port?: number;
  /** finished and stopped sessions are removed after this long unchanged */
  sessionTtlMs?: number;
  /** ready and paused sessions are removed after this long unchanged (default 1 h) */
  idleSessionTtlMs?: number;
  /** the wall time sessions' TTLs run on (tests move a fake one) */
  wallClock?: WallClock;
  /** live sessions at most, in all and per client (token name, else address) */
  maxSessions?: number;
  maxSessionsPerClient?: number;
  log?: Logger;
  /** query worker threads (default: the number of cores), queries waiting for one at most, and each query's deadline */
  queryWorkers?: number;
  maxQueuedQueries?: number;
  queryTimeoutMs?: number;
  /** event streams open at most, in all and per client */
  maxStreams?: number;
  maxStreamsPerClient?: number;
  /**
   * serve GET /api/events, export and replay from this fleet store instead of the node files
   * (clickhouse://HOST:PORT/DB[?cluster=NAME&timeout=SECONDS])
   */
  store?: string;
  /** the --tokens file; without it the daemon listens on loopback only */
  tokensFile?: string;
  allowedHosts?: readonly string[];
  tls?: TlsFiles;
  /** the built incident page served at / (default dist/web of the checkout) */
  webRoot?: string;
  /** --trace-url: the trace viewer the page links each event's trace to ({trace_id} in it) */
  traceUrl?: string;
}

export interface Daemon {
  url: string;
  stores: NodeStores;
  clock: HighResClock;
  replay: ReplaySessions;
  /** Reads the tokens file again (SIGHUP); false when it was bad and the old tokens stay. */
  reloadTokens(): boolean;
  /** Ends the replay streams (they never end by themselves), then closes the server, clock and stores. */
  close(): Promise<void>;
}

/** A data dir that is not there is a typo or a missing mount: serving it empty would hide that. */
function requireDataDir(dataDir: string): void {
  let isDir: boolean;
  try {
    isDir = statSync(dataDir).isDirectory();
  } catch (err) {
    throw new KreplayError('E_DATA_DIR', `--data-dir ${dataDir} cannot be used: ${(err as Error).message}`);
  }
  if (!isDir) throw new KreplayError('E_DATA_DIR', `--data-dir ${dataDir} is not a directory`);
}

export async function createDaemon(options: DaemonOptions): Promise<Daemon> {
  const log = options.log ?? createLogger({ component: 'daemon' });
  const host = options.host ?? '127.0.0.1';
  if (!options.tokensFile && !isLoopbackHost(host)) {
    throw new KreplayError(
      'E_UNSAFE_BIND',
      `refusing to listen on ${host} without --tokens: anyone who reaches it could read every recorded event and drive replays; give --tokens FILE, or listen on 127.0.0.1`,
    );
  }
  requireDataDir(options.dataDir);
  const tokens = options.tokensFile ? new TokenStore(options.tokensFile, log.child('auth')) : undefined;
  const stores = new NodeStores(options.dataDir, log.child('stores'));
  // incident files become read-only stores before anything reads the stores
  const incidents = new IncidentThread(options.dataDir, log.child('incidents'));
  try {
    await incidents.listing();
  } catch (err) {
    await incidents.close();
    stores.close();
    throw err;
  }
  incidents.watchEvery(INCIDENT_RESCAN_MS);
  // node stores are queried on the worker pool; the fleet store answers over HTTP, which does not
  // block, and the pool then reads only the stores built from incident files, where the fleet has nothing
  const fleet =
    options.store === undefined
      ? null
      : new ClickHouseEvents(new ClickHouseHttp(parseClickHouseUrl(options.store)));
  const metrics = new DaemonMetrics();
  const pool = new QueryPool({
    dataDir: options.dataDir,
    log: log.child('queries'),
    scope: fleet ? 'incidents' : 'all',
    workers: options.queryWorkers,
    maxQueued: options.maxQueuedQueries,
    timeoutMs: options.queryTimeoutMs,
    onDamaged: (damage) => stores.markDamaged(damage),
    onAnswered: (timing) => metrics.query(timing),
  });
  const events = fleet ? fleetFirstReader(fleet, pool.reader) : pool.reader;
  const clock = new HighResClock(log.child('replay'));
  const memory = new MemoryTrim();
  const replay = new ReplaySessions({
    dataDir: options.dataDir,
    // replay reads the node files on the query workers, the fleet store over HTTP: never on this thread
    reader: fleet ? storeTransactionReader(events) : pool.transactions,
    clock,
    log: log.child('replay'),
    ttlMs: options.sessionTtlMs ?? DEFAULT_SESSION_TTL_SECONDS * 1000,
    idleTtlMs: options.idleSessionTtlMs,
    wall: options.wallClock,
    maxSessions: options.maxSessions,
    maxSessionsPerClient: options.maxSessionsPerClient,
    timing: metrics.timing,
  });
  metrics.watchSessions(replay);
  metrics.watchQueries(() => pool.stats());
  const streamLimits = new StreamLimits(
    log.child('streams'),
    options.maxStreams,
    options.maxStreamsPerClient,
    () => memory.loadEnded(),
  );
  metrics.watchStreams(streamLimits);
  const release = async () => {
    memory.close();
    await incidents.close();
    await replay.close();
    await clock.close();
    await pool.close();
    stores.close();
  };
  try {
    // a session played before the clock thread runs would be released late
    await clock.ready();
    await pool.ready();
    const app = createApp({
      log,
      stores,
      replay,
      events,
      eventsJson: fleet ? undefined : pool.json,
      fleetStore: fleet !== null,
      incidents,
      queryWorkers: () => pool.health(),
      streamLimits,
      memoryTrim: memory,
      tokens,
      metrics,
      webRoot: options.webRoot ?? join(repoRoot(), 'dist', 'web'),
      allowedHosts: [host, ...(options.allowedHosts ?? [])],
      traceUrl: options.traceUrl,
    });
    const running = await listen(app, host, options.port ?? 0, options.tls);
    return {
      url: running.url,
      stores,
      clock,
      replay,
      reloadTokens: () => tokens?.reload() ?? false,
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
