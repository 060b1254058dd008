import { join } from 'node:path';
import type { Command } from 'commander';
import { repoRoot } from '../../agent/paths';
import { createLogger } from '../../core/log/logger';
import { createApp } from '../../daemon/app';
import { HighResClock } from '../../daemon/replay/clock/high-res-clock';
import { DEFAULT_SESSION_TTL_SECONDS, ReplaySessions } from '../../daemon/replay/sessions/session-service';
import { listen, untilSignal } from '../../daemon/server';
import { NodeStores } from '../../daemon/store/node-stores';
import { integerOption } from '../options';

export interface DaemonFlags {
  dataDir: string;
  host: string;
  port: number;
  sessionTtl: number;
}

export async function runDaemon(flags: DaemonFlags): Promise<void> {
  const log = createLogger({ component: 'daemon' });
  const stores = new NodeStores(flags.dataDir, log.child('stores'));
  const clock = new HighResClock(log.child('replay'));
  const replay = new ReplaySessions({
    dataDir: flags.dataDir,
    source: stores,
    clock,
    log: log.child('replay'),
    ttlMs: flags.sessionTtl * 1000,
  });
  try {
    const app = createApp({ log, stores, replay, webRoot: join(repoRoot(), 'dist', 'web') });
    const running = await listen(app, flags.host, flags.port);
    log.info('listening', { url: running.url, dataDir: flags.dataDir, nodes: stores.nodes().join(',') });
    await untilSignal(log);
    // replay streams never end by themselves: end them so that the server can close
    const closing = running.close();
    await replay.close();
    await closing;
  } finally {
    await replay.close();
    await clock.close();
    stores.close();
  }
  log.info('stopped');
}

export function registerDaemonCommand(program: Command): void {
  program
    .command('daemon')
    .description('serve GET /api/events and replay sessions over the node stores in --data-dir')
    .requiredOption('--data-dir <dir>', 'directory holding <node>.db files')
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option('--port <port>', 'TCP port (0 picks one)', integerOption(0, 65535), 7070)
    .option(
      '--session-ttl <seconds>',
      'remove finished and stopped replay sessions after this long unchanged',
      integerOption(1, 30 * 86400),
      DEFAULT_SESSION_TTL_SECONDS,
    )
    .action((flags: DaemonFlags) => runDaemon(flags));
}
