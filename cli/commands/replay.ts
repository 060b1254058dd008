/**
 * `kreplay replay TXN`: replays a transaction through the daemon and prints
 * each event as one line of JSON on stdout when it is emitted, so a pipeline
 * sees the calls at their recorded pace. Progress goes to stderr, and only to
 * a terminal. Exits 0 when the replay finishes, 1 on any error, 130 after
 * Ctrl-C (which stops the session first). With `--exec -- CMD`, drives a
 * test build instead (cli/exec). `--incident FILE` takes the events from
 * incident files instead of a daemon, and needs none (unless --server asks
 * for a live session there).
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import { MAX_EXTRA_LATENCY_NS, SPEED_FACTOR } from '../../daemon/replay/sessions/session-limits';
import { MATCHES, PACES } from '../exec/exec-plan';
import { DEFAULT_TOLERANCE, parseTolerance } from '../exec/tolerance';
import type { ExecFlags } from '../exec/exec-flags';
import { runExec } from '../exec/exec-run';
import { daemonIncident, EXEC_FIELDS, fileIncidents } from '../exec/incident-source';
import { checkMaps, collectMaps } from '../exec/target-keys';
import { collectPatterns } from '../exec/target-selection';
import { addLogOptions, type LogFlags } from '../log-options';
import { baseUrlOption, decimalOption, integerOption } from '../options';

/** The --exec flags (exec-flags.ts) and where the events come from. */
interface ReplayFlags extends ExecFlags, LogFlags {
  server?: string;
  incident?: string;
  exec?: boolean;
}

const DEFAULT_SERVER = 'http://127.0.0.1:7070';

/** Flags that only mean something with --exec. */
const EXEC_ONLY = [
  'map',
  'report',
  'reportJson',
  'replayErrors',
  'strict',
  'target',
  'skipTarget',
  'withClient',
] as const;

function transactionArgument(value: string): string {
  if (value === '') throw new InvalidArgumentError('must not be empty');
  return value;
}

function incidentArgument(value: string): string {
  if (value === '')
    throw new InvalidArgumentError('must not be empty: name an incident file (.kri) or a quoted glob');
  return value;
}

/** Whether `value` was typed before `--` (a transaction id), not taken from the command after it. */
function beforeDashes(cmd: Command, value: string): boolean {
  const raw = (cmd.parent ?? cmd) as Command & { rawArgs?: string[] };
  const args = raw.rawArgs ?? [];
  const dash = args.indexOf('--');
  return dash === -1 || args.slice(0, dash).includes(value);
}

/** The flag's name as typed: reportJson → --report-json. */
const flagName = (name: string) => `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/** A log flag typed on the command line, where only a replay through a daemon logs. */
const typedLogFlag = (cmd: Command) =>
  (['logLevel', 'logFormat'] as const).find((name) => cmd.getOptionValueSource(name) === 'cli');

/** Refuses a log flag where nothing would log (--exec prints through its report; a local replay, its lines). */
function refuseLogFlags(cmd: Command, where: string): void {
  const typed = typedLogFlag(cmd);
  if (typed) cmd.error(`error: ${flagName(typed)} applies to a replay through a daemon, not to ${where}`);
}

async function replayAction(
  transactionId: string | undefined,
  operands: string[],
  flags: ReplayFlags,
  cmd: Command,
): Promise<void> {
  // with --incident every operand is the command (there is no transaction id to name)
  const command = flags.incident && transactionId !== undefined ? [transactionId, ...operands] : operands;
  if (!flags.incident && transactionId === undefined)
    cmd.error(
      "error: missing required argument 'transaction-id' (or replay incident files with --incident FILE)",
    );
  if (!flags.exec) {
    if (command.length > 0) cmd.error(`error: a command (${command[0]}) needs --exec`);
    const misplaced = EXEC_ONLY.find(
      (name) => flags[name] !== undefined && !(Array.isArray(flags[name]) && flags[name].length === 0),
    );
    if (misplaced) cmd.error(`error: ${flagName(misplaced)} needs --exec`);
    // what a replay without --exec needs is loaded only then: --exec's start is added to the build's run
    const { runReplay } = await import('../session-replay');
    const log = (await import('../flag-logger')).loggerFromFlags(flags, 'replay');
    if (!flags.incident) return runReplay(transactionId!, flags.server ?? DEFAULT_SERVER, flags, log);
    if (!flags.server) refuseLogFlags(cmd, 'a local --incident replay (without --server)');
    const sources = await fileIncidents(flags.incident);
    if (!flags.server) {
      process.exitCode = await (await import('../local-replay')).playLocally(sources, flags);
      return;
    }
    const { uploadIncident } = await import('../exec/incident-upload');
    for (const source of sources)
      await runReplay(
        (await uploadIncident(flags.server, source.file!)).transaction_id,
        flags.server,
        flags,
        log,
      );
    return;
  }
  refuseLogFlags(cmd, '--exec');
  if (!flags.incident && transactionId !== undefined && !beforeDashes(cmd, transactionId))
    cmd.error(
      `error: --exec -- ${transactionId} needs what to replay: --incident FILE, or a transaction id before -- (replay TXN --exec -- CMD)`,
    );
  if (command.length === 0)
    cmd.error('error: --exec needs a command after --, e.g. --exec -- ./build/app --port 0');
  const sources = flags.incident
    ? await fileIncidents(flags.incident, EXEC_FIELDS)
    : [await daemonIncident(flags.server ?? DEFAULT_SERVER, transactionId!)];
  // a map that means nothing is refused before the build runs (usage: exit 2)
  const recorded = new Map<string, string>();
  for (const source of sources)
    for (const e of source.events) if (e.target) recorded.set(e.target, e.target_kind ?? 'other');
  checkMaps(flags.map, recorded);
  const server = flags.incident ? (flags.server ?? null) : (flags.server ?? DEFAULT_SERVER);
  process.exitCode = await runExec(sources, command, flags, server);
}

export function registerReplayCommand(program: Command): void {
  const command = program
    .command('replay')
    .description(
      'replay a transaction (through the daemon) or incident files (no daemon needed): its events as NDJSON on stdout, each at its moment, or against a test build with --exec',
    )
    .argument(
      '[transaction-id]',
      'transaction_id of the events to replay (not with --incident)',
      transactionArgument,
    )
    .argument('[command...]', 'with --exec: the test build to run, after --')
    .option(
      '--incident <file>',
      "replay incident files instead of a daemon's transaction: a file, or a quoted glob ('incidents/*.kri') to replay each in turn",
      incidentArgument,
    )
    .option(
      '--speed <factor>',
      `speed factor, ${SPEED_FACTOR.min}..${SPEED_FACTOR.max}`,
      decimalOption(SPEED_FACTOR.min, SPEED_FACTOR.max),
      1,
    )
    .addOption(
      new Option('--extra-latency-ns <ns>', 'latency added to every call, 0..60000000000 (60 s)')
        .argParser(integerOption(0, MAX_EXTRA_LATENCY_NS))
        .default(0, '0 ns'),
    )
    .option(
      '--server <url>',
      `daemon base URL (default: ${DEFAULT_SERVER}; with --incident, none: the replay runs here alone)`,
      baseUrlOption,
    )
    .option(
      '--exec',
      'run the command after -- as a test build: its writes, sends, fsyncs and connects to the targets the incident had take as long as the recorded ones',
    )
    .addOption(
      new Option(
        '--pace <pace>',
        'with --exec: hold each matched call its recorded duration, or until the replay timeline reaches its end',
      )
        .choices(PACES)
        .default('duration'),
    )
    .addOption(
      new Option(
        '--match <how>',
        "with --exec: a stream's writes (sockets, pipes, appended files) take the time the incident's same bytes took, or the k-th call the k-th call's",
      )
        .choices(MATCHES)
        .default('bytes'),
    )
    .option(
      '--replay-errors',
      "with --exec: a call whose recorded match failed fails with the incident's errno, without running",
    )
    .option(
      '--map <from=to>',
      'with --exec: rewrite a recorded path prefix (a directory covers everything under it) or socket address (repeatable)',
      collectMaps,
      [],
    )
    .option(
      '--target <pattern>',
      "with --exec: hold only calls to targets matching this shell pattern ('/tmp/app/*', 'tcp *:5432'; repeatable)",
      collectPatterns,
      [],
    )
    .option(
      '--skip-target <pattern>',
      'with --exec: never hold calls to targets matching this shell pattern (repeatable)',
      collectPatterns,
      [],
    )
    .option(
      '--with-client',
      "with --exec: hold the client's calls too (the process that wrote the request head); by default a replay replays the service's side",
    )
    .option(
      '--strict',
      'with --exec: every shortfall fails (fewer calls than recorded, holds beyond the tolerance, a recording that lost events), not only a replay that matched nothing',
    )
    .option(
      '--report <file>',
      'with --exec: write a JUnit XML report, a testsuite per incident, a testcase per target',
    )
    .option('--report-json <file>', 'with --exec: write the report as JSON')
    .addOption(
      new Option(
        '--tolerance <spec>',
        'with --exec: how far observed may differ from intended holds (10%, 1ms, or both: the larger)',
      )
        .argParser(parseTolerance)
        .default(parseTolerance(DEFAULT_TOLERANCE), DEFAULT_TOLERANCE),
    );
  // the log of a replay through a daemon: at debug, the scheduling its stream's reader got
  addLogOptions(command).action(replayAction);
}
