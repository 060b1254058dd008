import type { Command } from 'commander';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { forwardChildFlags, type Children } from '../up/forwarded-flags';
import { describeExit, exitStatus, SupervisedChild, type ChildExit } from '../up/supervised-child';

type Name = 'agent' | 'daemon';

/* The agent drains within 10 s of SIGTERM (cli/commands/agent.ts); past this it is killed. */
const STOP_GRACE_MS = 15_000;

function report(child: SupervisedChild, exit: ChildExit, others: string): void {
  const lines = child.lastLines();
  process.stderr.write(
    `kreplay up: the ${child.name} (pid ${child.process.pid ?? '-'}) ${describeExit(exit)}; stopping the ${others}\n` +
      (lines.length
        ? `kreplay up: its last lines on stderr:\n${lines.map((l) => `  | ${l}\n`).join('')}`
        : ''),
  );
}

/**
 * Agent and daemon together in the foreground, as `make run` starts them: two processes (the
 * daemon must never wait on the agent's event loop), with every flag of both, stopped together on
 * Ctrl-C or when either dies.
 */
export function registerUpCommand(program: Command, children: Children<Name>): void {
  const up = program
    .command('up')
    .description('run the agent and the daemon together until Ctrl-C; takes the flags of both');
  const argv = forwardChildFlags(up, children);
  up.action(async (flags: { dataDir: string; host: string; port: number }) => {
    // started as users start them, by the launcher beside this script, which holds their runtime flags
    const launcher = join(dirname(process.argv[1]!), 'kreplay');
    // the daemon refuses a data dir that is not there, and the agent may not have made it yet
    mkdirSync(flags.dataDir, { recursive: true });
    const running = (Object.keys(argv) as Name[]).map(
      (name) => new SupervisedChild(name, launcher, [name, ...argv[name]]),
    );
    process.stderr.write(
      `kreplay up: ${running.map((c) => `${c.name} pid ${c.process.pid ?? '-'}`).join(', ')}; ` +
        `query with  curl -s 'http://${flags.host}:${flags.port}/api/events?limit=10'  (Ctrl-C stops both)\n`,
    );
    let stopping = false;
    const stopAll = () => {
      stopping = true;
      running.forEach((child) => child.stop());
      setTimeout(() => running.forEach((child) => child.stop('SIGKILL')), STOP_GRACE_MS).unref();
    };
    process.on('SIGINT', stopAll);
    process.on('SIGTERM', stopAll);
    const first = await Promise.race(running.map((child) => child.exited.then((exit) => ({ child, exit }))));
    const died = !stopping;
    if (died) {
      const others = running.filter((c) => c !== first.child).map((c) => c.name);
      report(first.child, first.exit, others.join(' and '));
    }
    stopAll();
    const exits = await Promise.all(running.map((child) => child.exited));
    process.off('SIGINT', stopAll);
    process.off('SIGTERM', stopAll);
    // a child that died sets the status; after Ctrl-C, the worst of the two
    process.exitCode = died
      ? Math.max(exitStatus(first.exit), 1)
      : Math.max(...exits.map((exit) => exitStatus(exit)));
  });
}
