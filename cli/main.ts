/** `kreplay`: one entry point, a subcommand per job. Usage errors exit 2. */
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { registerAgentCommand } from './commands/agent';
import { registerDaemonCommand } from './commands/daemon';
import { registerEventsCommand } from './commands/events';
import { registerExportCommand } from './commands/export';
import { registerIncidentCommand } from './commands/incident';
import { registerReplayCommand } from './commands/replay';
import { registerRunCommand } from './commands/run';
import { registerSessionCommand } from './commands/session';
import { registerShipCommand } from './commands/ship';
import { registerUpCommand } from './commands/up';
import { humanizeDefaults } from './help-defaults';
import { versionText } from './version-text';

export function buildProgram(): Command {
  const program = new Command('kreplay')
    .description('Kernel tracing agent and query-and-replay daemon')
    .option('-V, --version', 'print the version, git commit, Node and libbpf versions')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  // the addon (libbpf's version) is loaded only when asked, not on every command
  program.on('option:version', () => {
    process.stdout.write(`${versionText()}\n`);
    throw new CommanderError(0, 'commander.version', 'version printed');
  });
  const agent = registerAgentCommand(program);
  const daemon = registerDaemonCommand(program);
  registerUpCommand(program, { agent, daemon });
  registerRunCommand(program);
  registerEventsCommand(program);
  registerExportCommand(program);
  registerIncidentCommand(program);
  registerReplayCommand(program);
  registerSessionCommand(program);
  registerShipCommand(program);
  const subcommands = (command: Command): Command[] =>
    command.commands.flatMap((sub) => [sub, ...subcommands(sub)]);
  for (const command of subcommands(program))
    command.exitOverride().showHelpAfterError('(run with --help for usage)');
  humanizeDefaults(program);
  return program;
}

export function main(argv: string[]): void {
  const program = buildProgram();
  program.parseAsync(argv).catch((err: unknown) => {
    // A flag found bad inside an action (two flags that go together, a value checked against
    // another): commander prints only the errors of its own parsing, so this one is printed here.
    if (err instanceof InvalidArgumentError) {
      process.stderr.write(`kreplay: error: ${err.message}\n(run with --help for usage)\n`);
      process.exitCode = 2;
      return;
    }
    if (err instanceof CommanderError) {
      // help and version exit 0; anything the user typed wrong exits 2
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      return;
    }
    const error = err as Error & { code?: string };
    process.stderr.write(`kreplay: ${error.message}${error.code ? ` (${error.code})` : ''}\n`);
    process.exitCode = 1;
  });
}
