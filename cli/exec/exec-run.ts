/**
 * `kreplay replay TXN --exec -- CMD [ARGS...]`: runs CMD under the seccomp
 * supervisor, each of its writes to a target the incident wrote to taking as
 * long as the incident's matching write (README, "Replay against a test
 * build"). Resolves to the exit status kreplay ends with: CMD's, or 130 after
 * Ctrl-C; its own failures throw, with CMD ended first.
 */
import fs from 'node:fs';
import { nativeAddon, type NativeExecSupervisor } from '../../core/native/addon';
import { exactJson } from '../../core/json/exact-json';
import { Schedule } from '../../daemon/replay/sessions/schedule';
import { requestJson } from '../daemon-request';
import { buildPlan, type Match, type Pace } from './exec-plan';
import { buildReport, junitXml, reportTable, type Tolerance } from './exec-report';
import { fetchIncident } from './incident';
import { commandLine, LaunchedBuild, resolveCommand, type BuildExit } from './launcher';
import { SessionLink } from './session-link';
import type { TargetMap } from './target-keys';

export interface ExecFlags {
  speed: number;
  extraLatencyNs: number;
  server: string;
  pace: Pace;
  match: Match;
  replayErrors?: boolean;
  map: TargetMap[];
  report?: string;
  reportJson?: string;
  tolerance: Tolerance;
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

export async function runExec(transactionId: string, argv: string[], flags: ExecFlags): Promise<number> {
  resolveCommand(argv[0]!);
  const events = await fetchIncident(flags.server, transactionId);
  if (events.length === 0) throw new Error(`no events with transaction_id ${JSON.stringify(transactionId)}`);
  const schedule = new Schedule(flags.speed, BigInt(flags.extraLatencyNs));
  const plan = buildPlan(events, {
    maps: flags.map,
    schedule,
    pace: flags.pace,
    match: flags.match,
    replayErrors: flags.replayErrors ?? false,
  });
  if (plan.length === 0)
    say(
      `the incident has no sys_write, sys_fsync or sys_connect events with a target: every call of the build passes through`,
    );

  const build = LaunchedBuild.start(argv);
  let supervisor: NativeExecSupervisor | null = null;
  let link: SessionLink | null = null;
  let session: SessionBody | null = null;
  let ended!: () => void;
  const supervisorEnded = new Promise<void>((resolve) => (ended = resolve));
  const base = `${flags.server}/api/replay/sessions`;
  try {
    session = await requestJson<SessionBody>('POST', base, {
      transaction_id: transactionId,
      speed_factor: flags.speed,
      extra_latency_ns: flags.extraLatencyNs,
      driving: { command: commandLine(argv), pid: build.pid },
    });
    const listenerFd = build.markAs(`${transactionId}-replay-${session.id}`);
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
        })),
      },
      (error) => {
        if (error) {
          say(`the supervisor failed (${error.code}): ${error.message}; the build is stopped`);
          build.kill();
        }
        ended();
      },
    );
    link = new SessionLink(`${base}/${session.id}/events`, supervisor, schedule, flags.pace, say);
    await link.open();
    await requestJson('POST', `${base}/${session.id}/play`);
  } catch (err) {
    build.kill();
    await build.exited.catch(() => undefined);
    build.release();
    link?.close();
    supervisor?.stop();
    if (session) await requestJson('POST', `${base}/${session.id}/stop`).catch(() => undefined);
    throw err;
  }
  const id = session.id;
  const running = supervisor;
  const following = link;

  // the timeline starts when CMD does
  running.setTimeline(true, 0);
  build.go();

  let interrupted = false;
  const onInterrupt = () => {
    if (interrupted) return;
    interrupted = true;
    say('interrupted: stopping the session and the build');
    void requestJson('POST', `${base}/${id}/stop`).catch(() => undefined);
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
    following.close();
  }
  if (exit.signal && !interrupted) say(`the build was killed by ${exit.signal}`);
  const current = await requestJson<SessionBody>('GET', `${base}/${id}`).catch(() => null);
  if (current && ['ready', 'playing', 'paused'].includes(current.state))
    await requestJson('POST', `${base}/${id}/stop`).catch(() => undefined);

  const results = running.results();
  const rows = buildReport(plan, results.targets, results.unmatched, flags.tolerance);
  process.stderr.write(`\nreplay ${transactionId} against \`${commandLine(argv)}\` (session ${id}):\n`);
  process.stderr.write(`${reportTable(rows)}\n`);
  if (results.bypassed > 0) say(`${results.bypassed} calls passed untouched after the session stopped`);
  const context = {
    transactionId,
    sessionId: id,
    command: commandLine(argv),
    exitStatus: exit.status,
    timestamp: new Date().toISOString(),
  };
  if (flags.report) fs.writeFileSync(flags.report, junitXml(rows, context));
  if (flags.reportJson) {
    const json = {
      transaction_id: transactionId,
      session_id: id,
      command: context.command,
      pace: flags.pace,
      match: flags.match,
      replay_errors: flags.replayErrors ?? false,
      speed_factor: flags.speed,
      extra_latency_ns: flags.extraLatencyNs,
      exit_status: exit.status,
      bypassed: results.bypassed,
      targets: rows,
    };
    fs.writeFileSync(flags.reportJson, `${exactJson(json)}\n`);
  }
  return interrupted ? 130 : exit.status;
}
