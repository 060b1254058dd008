import { InvalidArgumentError, type Command } from 'commander';
import { createLogger } from '../../core/log/logger';
import { createDaemon } from '../../daemon/create-daemon';
import type { TlsFiles } from '../../daemon/server';
import { DEFAULT_SESSION_TTL_SECONDS } from '../../daemon/replay/sessions/session-service';
import { integerOption } from '../options';
import { untilSignal } from '../signals';

export interface DaemonFlags {
  dataDir: string;
  host: string;
  port: number;
  sessionTtl: number;
  store?: string;
  tokens?: string;
  allowedHost: string[];
  tlsCert?: string;
  tlsKey?: string;
}

function tlsFiles(flags: DaemonFlags): TlsFiles | undefined {
  if (!flags.tlsCert && !flags.tlsKey) return undefined;
  if (!flags.tlsCert || !flags.tlsKey) throw new InvalidArgumentError('--tls-cert and --tls-key go together');
  return { cert: flags.tlsCert, key: flags.tlsKey };
}

export async function runDaemon(flags: DaemonFlags): Promise<void> {
  const log = createLogger({ component: 'daemon' });
  const daemon = await createDaemon({
    dataDir: flags.dataDir,
    host: flags.host,
    port: flags.port,
    sessionTtlMs: flags.sessionTtl * 1000,
    store: flags.store,
    log,
    tokensFile: flags.tokens,
    allowedHosts: flags.allowedHost,
    tls: tlsFiles(flags),
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
  return program
    .command('daemon')
    .description('serve GET /api/events and replay sessions over the node stores in --data-dir')
    .requiredOption('--data-dir <dir>', 'directory holding <node>.db files')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option(
      '--store <url>',
      'serve GET /api/events from the fleet store at clickhouse://HOST:PORT/DB (replay still reads --data-dir)',
    )
    .option('--port <port>', 'TCP port (0 picks one)', integerOption(0, 65535), 7070)
    .option(
      '--session-ttl <seconds>',
      'remove finished and stopped replay sessions after this long unchanged',
      integerOption(1, 30 * 86400),
      DEFAULT_SESSION_TTL_SECONDS,
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
    .option('--tls-cert <file>', 'serve HTTPS with this PEM certificate chain (with --tls-key)')
    .option('--tls-key <file>', 'the PEM private key of --tls-cert')
    .action((flags: DaemonFlags) => runDaemon(flags));
}
