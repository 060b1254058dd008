import type { Command } from 'commander';
import { createLogger } from '../../agent/log/logger';
import { createApp } from '../../daemon/app';
import { listen, untilSignal } from '../../daemon/server';
import { NodeStores } from '../../daemon/store/node-stores';
import { integerOption } from '../options';

export interface DaemonFlags {
  dataDir: string;
  host: string;
  port: number;
}

export async function runDaemon(flags: DaemonFlags): Promise<void> {
  const log = createLogger({ component: 'daemon' });
  const stores = new NodeStores(flags.dataDir, log.child('stores'));
  try {
    const app = createApp({ log, stores });
    const running = await listen(app, flags.host, flags.port);
    log.info('listening', { url: running.url, dataDir: flags.dataDir, nodes: stores.nodes().join(',') });
    await untilSignal(log);
    await running.close();
  } finally {
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
    .action((flags: DaemonFlags) => runDaemon(flags));
}
