import type { Command } from 'commander';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';

/**
 * Agent and daemon together in the foreground, as `make run` starts them:
 * two processes (the daemon must never wait on the agent's event loop),
 * stopped together on Ctrl-C.
 */
export function registerUpCommand(program: Command): void {
  program
    .command('up')
    .description('run the agent and the daemon together until Ctrl-C')
    .requiredOption('--data-dir <dir>', 'directory for the node stores')
    .option('--port <port>', 'daemon port', '7070')
    .action(async (flags: { dataDir: string; port: string }) => {
      const self = process.argv[1]!;
      // the daemon refuses a data dir that is not there, and the agent may not have made it yet
      mkdirSync(flags.dataDir, { recursive: true });
      const children: ChildProcess[] = [
        spawn(process.execPath, [self, 'agent', '--data-dir', flags.dataDir], { stdio: 'inherit' }),
        spawn(process.execPath, [self, 'daemon', '--data-dir', flags.dataDir, '--port', flags.port], {
          stdio: 'inherit',
        }),
      ];
      const exits = children.map(
        (child) => new Promise<number>((resolve) => child.once('exit', (code) => resolve(code ?? 1))),
      );
      process.stderr.write(
        `kreplay up: query with  curl -s 'http://127.0.0.1:${flags.port}/api/events?limit=10'  (Ctrl-C stops both)\n`,
      );
      const stopAll = () => children.forEach((child) => child.exitCode === null && child.kill('SIGTERM'));
      process.on('SIGINT', stopAll);
      process.on('SIGTERM', stopAll);
      // If either dies, stop the other too.
      const first = await Promise.race(exits);
      stopAll();
      const codes = await Promise.all(exits);
      process.exitCode = first !== 0 ? first : Math.max(...codes);
    });
}
