/**
 * `kreplay replay TXN|--incident FILE --exec -- CMD [ARGS...]`: runs CMD under
 * the seccomp supervisor, each of its writes to a target the incident wrote to
 * taking as long as the incident's matching write (docs/replay.md, "Replay against a
 * test build"). With a daemon (TXN, or --incident with --server) the replay is
 * a live session there; without, it runs on the supervisor's own clock and
 * needs nothing else. Several incidents are replayed in turn, each against a
 * fresh CMD. Resolves to the exit status (exec-verdict.ts); failures before
 * the build starts throw, with CMD ended first.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { nativeAddon, type NativeExecSupervisor, type NativeNeverHeld } from '../../core/native/addon';
import { exactJson } from '../../core/json/exact-json';
import { Schedule } from '../../core/replay/schedule';
import { requestJson } from '../daemon-request';
import { sessionLinks } from '../session-links';
import { causeName, checkCauses } from './cause-check';
import { buildPlan, type Match, type Pace } from './exec-plan';
import { buildReport, formatNs, reportTable, type Tolerance } from './exec-report';
import { combinedStatus, verdict, type Verdict } from './exec-verdict';
import type { IncidentSource } from './incident-source';
import { uploadIncident } from './incident-upload';
import { junitXml, type SuiteReport } from './junit-report';
import { commandLine, LaunchedBuild, resolveCommand, type BuildExit } from './launcher';
import { SessionLink } from './session-link';
import { clientPid, TargetSelection } from './target-selection';
import type { TargetMap } from './target-keys';

export interface ExecFlags {
  speed: number;
  extraLatencyNs: number;
  pace: Pace;
  match: Match;
  replayErrors?: boolean;
  map: TargetMap[];
  report?: string;
  reportJson?: string;
  tolerance: Tolerance;
  strict?: boolean;
  target: string[];
  skipTarget: string[];
  withClient?: boolean;
}

interface SessionBody {
  id: string;
  state: string;
}

/** After CMD's end, how long the supervisor may take to see the last supervised process go. */
const SUPERVISOR_END_MS = 2000;
/** After Ctrl-C's SIGTERM, how long CMD gets before it is killed. */
const TERMINATE_GRACE_MS = 5000;

const say = (text: string) => process.stderr.write(`kreplay: ${text}\n`);

/** The stdout and stderr kreplay hands the build: never held, whatever the incident wrote to. */
function handedOutputs(): NativeNeverHeld[] {
  const out: NativeNeverHeld[] = [];
  for (const [fd, label] of [
    [1, '(stdout)'],
    [2, '(stderr)'],
  ] as const) {
    try {
      const st = fs.fstatSync(fd, { bigint: true });
      out.push({ dev: st.dev, ino: st.ino, label });
    } catch {
      // closed: nothing of the build's can reach it
    }
  }
  return out;
}

/** The daemon side of a replay: the session the build is marked with and that paces it. */
class DaemonSession {
  private constructor(
    private readonly base: string,
    readonly id: string,
  ) {}

  static async create(
    server: string,
    source: IncidentSource,
    flags: ExecFlags,
    argv: readonly string[],
    pid: number,
  ): Promise<DaemonSession> {
    // a file is served by the daemon once uploaded; its transaction is then replayable by id
    const transactionId = source.file
      ? (await uploadIncident(server, source.file)).transaction_id
      : source.transactionId;
    const base = `${server}/api/replay/sessions`;
    const session = await requestJson<SessionBody>('POST', base, {
      transaction_id: transactionId,
      speed_factor: flags.speed,
      extra_latency_ns: flags.extraLatencyNs,
      driving: { command: commandLine(argv), pid },
    });
    const links = sessionLinks(server, session.id, transactionId);
    say(`session ${session.id} (kreplay session pause|play|seek|stop ${session.id})`);
    say(`  API: ${links.api}`);
    say(`  web: ${links.web}`);
    return new DaemonSession(base, session.id);
  }

  get eventsUrl(): string {
    return `${this.base}/${this.id}/events`;
  }

  control(what: 'play' | 'stop'): Promise<unknown> {
    return requestJson('POST', `${this.base}/${this.id}/${what}`);
  }

  /** Stops the session unless it already ended. */
  async end(): Promise<void> {
    const current = await requestJson<SessionBody>('GET', `${this.base}/${this.id}`).catch(() => null);
    if (current && ['ready', 'playing', 'paused'].includes(current.state))
      await this.control('stop').catch(() => undefined);
  }
}

interface IncidentResult {
  suite: SuiteReport;
  json: Record<string, unknown>;
}

async function replayOne(
  source: IncidentSource,
  argv: string[],
  flags: ExecFlags,
  server: string | null,
): Promise<IncidentResult> {
  const started = Date.now();
  const schedule = new Schedule(flags.speed, BigInt(flags.extraLatencyNs));
  const selection = new TargetSelection(flags, clientPid(source.events));
  const plan = buildPlan(source.events, {
    maps: flags.map,
    schedule,
    pace: flags.pace,
    match: flags.match,
    replayErrors: flags.replayErrors ?? false,
    exclude: selection.exclude,
  });
  if (plan.length === 0)
    say(
      `${source.name}: nothing to hold (no sys_write, sys_fsync or sys_connect event with a target is selected): every call of the build passes`,
    );

  const build = LaunchedBuild.start(argv);
  let supervisor: NativeExecSupervisor | null = null;
  let link: SessionLink | null = null;
  let session: DaemonSession | null = null;
  let supervisorFailed = false;
  let ended!: () => void;
  const supervisorEnded = new Promise<void>((resolve) => (ended = resolve));
  try {
    if (server) session = await DaemonSession.create(server, source, flags, argv, build.pid);
    const mark = `${source.transactionId}-replay-${session ? session.id : `local-${randomUUID().slice(0, 8)}`}`;
    const listenerFd = build.markAs(mark);
    supervisor = new (nativeAddon().ExecSupervisor)(
      listenerFd,
      {
        pace: flags.pace,
        targets: plan.map((t) => ({
          call: t.call,
          keys: t.keys,
          holdsNs: t.holdsNs,
          errnos: t.errnos,
          bytesEnd: t.bytesEnd,
          spansNs: t.spansNs,
          requestKeys: t.requestKeys,
        })),
        neverHeld: handedOutputs(),
      },
      (error) => {
        if (error) {
          supervisorFailed = true;
          say(`the supervisor failed (${error.code}): ${error.message}; the build is stopped`);
          build.kill();
        }
        ended();
      },
    );
    if (session) {
      link = new SessionLink(session.eventsUrl, supervisor, schedule, flags.pace, say);
      await link.open();
      await session.control('play');
    }
  } catch (err) {
    build.kill();
    await build.exited.catch(() => undefined);
    build.release();
    link?.close();
    supervisor?.stop();
    if (session) await session.control('stop').catch(() => undefined);
    throw err;
  }
  const running = supervisor;

  // the timeline starts when CMD does; without a daemon it is the supervisor's own clock
  running.setTimeline(true, 0);
  // the supervisor's times are CLOCK_MONOTONIC, as hrtime's
  const goNs = process.hrtime.bigint();
  build.go();

  let interrupted = false;
  const onInterrupt = () => {
    if (interrupted) return;
    interrupted = true;
    say('interrupted: stopping the replay and the build');
    if (session) void session.control('stop').catch(() => undefined);
    running.bypass();
    build.terminate();
    setTimeout(() => build.kill(), TERMINATE_GRACE_MS).unref();
  };
  process.on('SIGINT', onInterrupt);
  process.on('SIGTERM', onInterrupt);
  let exit: BuildExit;
  try {
    exit = await build.exited;
  } finally {
    process.off('SIGINT', onInterrupt);
    process.off('SIGTERM', onInterrupt);
    // the launcher kills what CMD left before it reports; the listener then hangs up
    await Promise.race([
      supervisorEnded,
      new Promise((resolve) => setTimeout(resolve, SUPERVISOR_END_MS).unref()),
    ]);
    running.stop();
    link?.close();
  }
  if (exit.signal && !interrupted) say(`the build was killed by ${exit.signal}`);
  await session?.end();

  const results = running.results();
  const firstHeldNs = results.firstHeldNs === null ? null : bigMax(results.firstHeldNs - goNs, 0n);
  const rows = buildReport(plan, results.targets, results.unmatched, flags.tolerance, [
    ...selection.excluded.values(),
  ]);
  const command = commandLine(argv);
  const causes = checkCauses({
    causes: source.causes,
    events: source.events,
    plan,
    outcomes: results.targets,
    excluded: selection.reasons,
    maps: flags.map,
    unplannedCalls: new Map(results.unmatched.map((u) => [u.target, u.calls])),
  });
  const outcome: Verdict = verdict({
    buildStatus: exit.status,
    interrupted,
    supervisorFailed,
    rows,
    strict: flags.strict === true,
    completeness: source.completeness,
    causes,
  });
  process.stderr.write(
    `\nreplay ${source.name} against \`${command}\`${session ? ` (session ${session.id})` : ''}:\n${reportTable(rows)}\n`,
  );
  for (const c of causes)
    say(
      `cause ${c.exercised ? 'exercised' : c.deselected ? 'not checked' : 'NOT exercised'}: ${causeName(c)}: ${c.reason}`,
    );
  if (results.bypassed > 0)
    say(`${results.bypassed} calls passed untouched after the ${session ? 'session' : 'replay'} stopped`);
  if (results.peersFromProc > 0)
    say(
      `pidfd_getfd was denied: ${results.peersFromProc} socket peers were read from /proc/<pid>/net instead`,
    );
  if (!results.realtime)
    say(
      'no real-time priority for the supervisor (CAP_SYS_NICE or RLIMIT_RTPRIO): holds may end later on a loaded machine',
    );
  say(
    firstHeldNs === null
      ? 'the build made no call kreplay held'
      : `the build's first held call came ${formatNs(firstHeldNs)} after it started`,
  );
  if (!source.completeness.known) say(`${source.name}: whether the recording lost events is unknown`);
  for (const reason of outcome.reasons) say(`${outcome.kind === 'passed' ? 'warning: ' : ''}${reason}`);
  say(`${source.name}: ${outcome.kind} (exit ${outcome.status})`);

  const suite: SuiteReport = {
    incident: source.name,
    transactionId: source.transactionId,
    digest: source.digest,
    sessionId: session?.id ?? null,
    command,
    exitStatus: exit.status,
    timestamp: new Date(started).toISOString(),
    speedFactor: flags.speed,
    extraLatencyNs: flags.extraLatencyNs,
    pace: flags.pace,
    strict: flags.strict === true,
    seconds: (Date.now() - started) / 1000,
    firstHeldNs,
    rows,
    causes,
    verdict: outcome,
    completeness: source.completeness,
  };
  const json = {
    incident: source.name,
    transaction_id: source.transactionId,
    incident_digest: source.digest,
    session_id: session?.id ?? null,
    command,
    pace: flags.pace,
    match: flags.match,
    replay_errors: flags.replayErrors ?? false,
    speed_factor: flags.speed,
    extra_latency_ns: flags.extraLatencyNs,
    strict: flags.strict === true,
    exit_status: exit.status,
    verdict: outcome.kind,
    status: outcome.status,
    reasons: outcome.reasons,
    recording_complete: source.completeness.known ? source.completeness.lost.length === 0 : null,
    recording_lost: source.completeness.lost,
    bypassed: results.bypassed,
    first_held_ns: firstHeldNs,
    causes,
    targets: rows,
  };
  return { suite, json };
}

const bigMax = (a: bigint, b: bigint) => (a > b ? a : b);

/** Throws, naming the flag, when `file` cannot be written (its directory missing or not writable, or it is read-only). */
function checkWritable(flag: string, file: string): void {
  const dir = path.dirname(path.resolve(file));
  try {
    if (fs.existsSync(file)) {
      if (fs.statSync(file).isDirectory()) throw new Error('it is a directory');
      fs.accessSync(file, fs.constants.W_OK);
    } else {
      if (!fs.statSync(dir).isDirectory()) throw new Error(`${dir} is not a directory`);
      fs.accessSync(dir, fs.constants.W_OK);
    }
  } catch (err) {
    throw new Error(`${flag} ${file}: cannot be written (${(err as Error).message}); nothing ran`, {
      cause: err,
    });
  }
}

/**
 * Replays each incident in turn against a fresh CMD; writes the reports (one
 * JUnit testsuite per incident) and resolves to the combined exit status.
 */
export async function runExec(
  sources: readonly IncidentSource[],
  argv: string[],
  flags: ExecFlags,
  server: string | null,
): Promise<number> {
  resolveCommand(argv[0]!);
  // a report that cannot be written is refused before anything runs, not after the build
  for (const [flag, file] of [
    ['--report', flags.report],
    ['--report-json', flags.reportJson],
  ] as const)
    if (file !== undefined) checkWritable(flag, file);
  const results: IncidentResult[] = [];
  for (const [i, source] of sources.entries()) {
    if (sources.length > 1) say(`incident ${i + 1} of ${sources.length}: ${source.name}`);
    const result = await replayOne(source, argv, flags, server);
    results.push(result);
    if (result.suite.verdict.kind === 'interrupted' || result.suite.verdict.kind === 'replay-failed') break;
  }
  if (flags.report) fs.writeFileSync(flags.report, junitXml(results.map((r) => r.suite)));
  if (flags.reportJson) {
    // one incident: its report as before; several: a list of them
    const json =
      results.length === 1 && sources.length === 1
        ? results[0]!.json
        : { incidents: results.map((r) => r.json) };
    fs.writeFileSync(flags.reportJson, `${exactJson(json)}\n`);
  }
  return combinedStatus(results.map((r) => r.suite.verdict));
}
