import { Command, InvalidArgumentError } from 'commander';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../../core/repo-root';
import { CONTEXT_VALUE, CONTEXT_VALUE_RULE, MARKER_PREFIX } from '../../agent/attribution/context-parser';

function contextValue(value: string): string {
  if (!CONTEXT_VALUE.test(value)) throw new InvalidArgumentError(`expected ${CONTEXT_VALUE_RULE}`);
  return value;
}

/** Built by make from cli/exec-shim.c: writes the marker, then execs CMD in the same thread. */
export function execShimPath(): string {
  return join(repoRoot(), 'build', 'kreplay-exec-shim');
}

/**
 * Tags a whole command: the forked child writes the marker and execs CMD
 * (the shim), so CMD and everything it starts carry the context in the
 * kernel, and the wrapper's own event-loop writes carry none.
 */
export function runTagged(txn: string, trace: string | undefined, argv: string[]): Promise<number> {
  const shim = execShimPath();
  if (!existsSync(shim)) {
    process.stderr.write(`kreplay run: ${shim} is missing: run make build\n`);
    return Promise.resolve(127);
  }
  const marker = `${MARKER_PREFIX} txn=${txn}${trace ? ` trace=${trace}` : ''}\n`;
  return new Promise((resolve) => {
    const child = spawn(shim, [marker, ...argv], { stdio: 'inherit' });
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
    for (const s of signals) process.on(s, forward);
    child.once('error', (err) => {
      process.stderr.write(`kreplay run: cannot start ${argv[0]}: ${err.message}\n`);
      resolve(127);
    });
    child.once('exit', (code, signal) => {
      for (const s of signals) process.off(s, forward);
      resolve(code ?? 128 + (signal ? constants.signals[signal] : 0));
    });
  });
}

export function registerRunCommand(program: Command): void {
  program
    .command('run')
    .description('run CMD so that its writes and those of everything it starts carry a transaction')
    .requiredOption('--txn <id>', 'transaction id', contextValue)
    .option('--trace <id>', 'trace id', contextValue)
    .argument('<cmd...>', 'command and its arguments (after --)')
    .action(async (cmd: string[], flags: { txn: string; trace?: string }) => {
      process.exitCode = await runTagged(flags.txn, flags.trace, cmd);
    });
}
