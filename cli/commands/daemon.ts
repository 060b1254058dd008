import { InvalidArgumentError, type Command } from 'commander';
import type { TlsFiles } from '../../daemon/server';
import {
  DEFAULT_MAX_QUEUED_QUERIES,
  DEFAULT_QUERY_TIMEOUT_MS,
  DEFAULT_QUERY_WORKERS,
} from '../../daemon/queries/query-pool';
import {
  DEFAULT_IDLE_SESSION_TTL_SECONDS,
  DEFAULT_MAX_SESSIONS,
  DEFAULT_MAX_SESSIONS_PER_CLIENT,
  DEFAULT_SESSION_TTL_SECONDS,
} from '../../daemon/replay/sessions/session-limits';
import { loggerFromFlags } from '../flag-logger';
import { addLogOptions, type LogFlags } from '../log-options';
import { decimalOption, integerOption, parsedOption } from '../options';
import {
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_CLIENT,
} from '../../daemon/replay/stream/stream-limits';
import { untilSignal } from '../signals';
import { checkTraceUrl } from '../../daemon/web/trace-url';

const traceUrlOption = parsedOption(checkTraceUrl, false);

export interface DaemonFlags extends LogFlags {
  dataDir: string;
  host: string;
  port: number;
  sessionTtl: number;
  idleSessionTtl: number;
  maxSessions: number;
  maxSessionsPerClient: number;
  queryWorkers: number;
  maxQueuedQueries: number;
  queryTimeout: number;
  maxStreams: number;
  maxStreamsPerClient: number;
  store?: string;
  tokens?: string;
  allowedHost: string[];
  tlsCert?: string;
  tlsKey?: string;
  traceUrl?: string;
}

function tlsFiles(flags: DaemonFlags): TlsFiles | undefined {
  if (!flags.tlsCert && !flags.tlsKey) return undefined;
  if (!flags.tlsCert || !flags.tlsKey) throw new InvalidArgumentError('--tls-cert and --tls-key go together');
  return { cert: flags.tlsCert, key: flags.tlsKey };
}

export async function runDaemon(flags: DaemonFlags): Promise<void> {
  // loaded when a daemon runs, not by every command: express and the routers cost a CLI start ~50 ms
  const { createDaemon } = await import('../../daemon/create-daemon');
  const log = loggerFromFlags(flags, 'daemon');
  const daemon = await createDaemon({
    dataDir: flags.dataDir,
    host: flags.host,
    port: flags.port,
    sessionTtlMs: flags.sessionTtl * 1000,
    idleSessionTtlMs: flags.idleSessionTtl * 1000,
    maxSessions: flags.maxSessions,
    maxSessionsPerClient: flags.maxSessionsPerClient,
    queryWorkers: flags.queryWorkers,
    maxQueuedQueries: flags.maxQueuedQueries,
    queryTimeoutMs: flags.queryTimeout * 1000,
    maxStreams: flags.maxStreams,
    maxStreamsPerClient: flags.maxStreamsPerClient,
    store: flags.store,
    log,
    tokensFile: flags.tokens,
    allowedHosts: flags.allowedHost,
    tls: tlsFiles(flags),
    traceUrl: flags.traceUrl,
  });
  const reload = () => daemon.reloadTokens();
  if (flags.tokens) process.on('SIGHUP', reload);
  try {
    log.info('listening', {
      url: daemon.url,
      dataDir: flags.dataDir,
      nodes: daemon.stores.nodes().join(','),
      events: flags.store ?? flags.dataDir,
    });
    await untilSignal(log);
  } finally {
    process.off('SIGHUP', reload);
    await daemon.close();
  }
  log.info('stopped');
}

export function registerDaemonCommand(program: Command): Command {
  const command = program
    .command('daemon')
    .description('serve GET /api/events and replay sessions over the node stores in --data-dir')
    .requiredOption('--data-dir <dir>', 'directory holding <node>.db files')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option(
      '--store <url>',
      'serve events, export and replay from the fleet store at clickhouse://HOST:PORT/DB[?cluster=NAME&timeout=SECONDS]',
    )
    .option('--port <port>', 'TCP port (0 picks one)', integerOption(0, 65535), 7070)
    .option(
      '--session-ttl <seconds>',
      'remove finished and stopped replay sessions after this long unchanged',
      integerOption(1, 30 * 86400),
      DEFAULT_SESSION_TTL_SECONDS,
    )
    .option(
      '--idle-session-ttl <seconds>',
      'remove ready and paused replay sessions after this long unchanged',
      integerOption(1, 30 * 86400),
      DEFAULT_IDLE_SESSION_TTL_SECONDS,
    )
    .option(
      '--max-sessions <n>',
      'ready, playing and paused replay sessions at most (then 429)',
      integerOption(1, 100_000),
      DEFAULT_MAX_SESSIONS,
    )
    .option(
      '--max-sessions-per-client <n>',
      'of those, at most this many per client: its token name, or its address without --tokens',
      integerOption(1, 100_000),
      DEFAULT_MAX_SESSIONS_PER_CLIENT,
    )
    .option(
      '--tokens <file>',
      'bearer tokens, one "token scope name" per line (scopes read, control); SIGHUP reloads it',
    )
    .option(
      '--allowed-host <name>',
      'a name clients may reach this daemon by (Host header), besides loopback and --host; repeatable',
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .option(
      '--query-workers <n>',
      'threads running the queries, each with its own read-only connections',
      integerOption(1, 64),
      DEFAULT_QUERY_WORKERS,
    )
    .option(
      '--max-queued-queries <n>',
      'queries waiting for a free worker at most; past it 503 with Retry-After',
      integerOption(1, 100_000),
      DEFAULT_MAX_QUEUED_QUERIES,
    )
    .option(
      '--query-timeout <seconds>',
      'a query running longer gets 503 and its worker is replaced',
      decimalOption(0.001, 3600),
      DEFAULT_QUERY_TIMEOUT_MS / 1000,
    )
    .option(
      '--max-streams <n>',
      'replay event streams open at most (then 503); each holds a socket and up to 256 KiB',
      integerOption(1, 1_000_000),
      DEFAULT_MAX_STREAMS,
    )
    .option(
      '--max-streams-per-client <n>',
      'of those, at most this many per client (token name, else address)',
      integerOption(1, 1_000_000),
      DEFAULT_MAX_STREAMS_PER_CLIENT,
    )
    .option('--tls-cert <file>', 'serve HTTPS with this PEM certificate chain (with --tls-key)')
    .option('--tls-key <file>', 'the PEM private key of --tls-cert')
    .option(
      '--trace-url <template>',
      "link each event's trace on the timeline page to this trace viewer URL, {trace_id} replaced (e.g. https://jaeger.example/trace/{trace_id})",
      traceUrlOption,
    );
  return addLogOptions(command).action((flags: DaemonFlags) => runDaemon(flags));
}
