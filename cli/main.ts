/** `kreplay`: one entry point, a subcommand per job. Usage errors exit 2. */
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { humanizeDefaults } from './help-defaults';
import { versionText } from './version-text';

/**
 * A module required when its command is registered, not when main.ts loads: a command's start pays
 * for its own modules, not for the agent's SQLite and logger (what `replay --incident --exec` loads
 * is added to the run of the build it replays against).
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const load = <T>(id: string): T => require(id) as T;

/** Each subcommand, registered from its own module, in the order --help lists them. */
const COMMANDS: Record<string, (program: Command) => void> = {
  agent: (program) =>
    load<typeof import('./commands/agent')>('./commands/agent').registerAgentCommand(program),
  daemon: (program) =>
    load<typeof import('./commands/daemon')>('./commands/daemon').registerDaemonCommand(program),
  up: (program) => {
    // `up` takes the agent's and the daemon's flags: theirs as registered, else registered here
    const child = (name: 'agent' | 'daemon'): Command => {
      const registered = () => program.commands.find((command) => command.name() === name);
      if (!registered()) COMMANDS[name]!(program);
      return registered()!;
    };
    load<typeof import('./commands/up')>('./commands/up').registerUpCommand(program, {
      agent: child('agent'),
      daemon: child('daemon'),
    });
  },
  run: (program) => load<typeof import('./commands/run')>('./commands/run').registerRunCommand(program),
  events: (program) =>
    load<typeof import('./commands/events')>('./commands/events').registerEventsCommand(program),
  export: (program) =>
    load<typeof import('./commands/export')>('./commands/export').registerExportCommand(program),
  incident: (program) =>
    load<typeof import('./commands/incident')>('./commands/incident').registerIncidentCommand(program),
  replay: (program) =>
    load<typeof import('./commands/replay')>('./commands/replay').registerReplayCommand(program),
  session: (program) =>
    load<typeof import('./commands/session')>('./commands/session').registerSessionCommand(program),
  ship: (program) => load<typeof import('./commands/ship')>('./commands/ship').registerShipCommand(program),
};

/**
 * The program with every subcommand, or with `only` (a subcommand's name) alone: what `main` runs
 * when the command line names one; help, the version and a mistyped command get them all.
 */
export function buildProgram(only?: string): Command {
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
  const names = only !== undefined && Object.hasOwn(COMMANDS, only) ? [only] : Object.keys(COMMANDS);
  for (const name of names)
    if (!program.commands.some((command) => command.name() === name)) COMMANDS[name]!(program);
  const subcommands = (command: Command): Command[] =>
    command.commands.flatMap((sub) => [sub, ...subcommands(sub)]);
  for (const command of subcommands(program))
    command.exitOverride().showHelpAfterError('(run with --help for usage)');
  humanizeDefaults(program);
  return program;
}

export function main(argv: string[]): void {
  // argv[2] names the subcommand, unless an option of kreplay's own comes first
  const program = buildProgram(argv[2]);
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
