import type { Command } from 'commander';
import { createLogger } from '../../core/log/logger';
import { createDaemon } from '../../daemon/create-daemon';
import { DEFAULT_SESSION_TTL_SECONDS } from '../../daemon/replay/sessions/session-service';
import { integerOption } from '../options';
import { untilSignal } from '../signals';

export interface DaemonFlags {
  dataDir: string;
  host: string;
  port: number;
  sessionTtl: number;
  store?: string;
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
  });
  try {
    log.info('listening', {
      url: daemon.url,
      dataDir: flags.dataDir,
      nodes: daemon.stores.nodes().join(','),
      events: flags.store ?? flags.dataDir,
    });
    await untilSignal(log);
  } finally {
    await daemon.close();
  }
  log.info('stopped');
}

export function registerDaemonCommand(program: Command): void {
  program
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
    .action((flags: DaemonFlags) => runDaemon(flags));
}
