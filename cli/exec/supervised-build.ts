/**
 * One incident's build under the supervisor: CMD launched and marked, the supervisor holding its
 * calls to the plan, the daemon's session (if any) driving it, Ctrl-C and SIGTERM turned into a
 * stop, and what the supervisor counted once CMD has ended. Failures before CMD starts throw,
 * with CMD ended first.
 */
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import {
  nativeAddon,
  type NativeExecResults,
  type NativeExecSupervisor,
  type NativeNeverHeld,
} from '../../core/native/addon';
import type { Schedule } from '../../core/replay/schedule';
import type { DaemonSession } from './daemon-session';
import type { ExecFlags } from './exec-flags';
import type { PlanTarget } from './exec-plan';
import type { IncidentSource } from './incident-source';
import { LaunchedBuild, type BuildExit } from './launcher';
import { say } from './say';
import type { SessionLink } from './session-link';

/** After CMD's end, how long the supervisor may take to see the last supervised process go. */
const SUPERVISOR_END_MS = 2000;
/** After Ctrl-C's SIGTERM, how long CMD gets before it is killed. */
const TERMINATE_GRACE_MS = 5000;

export interface SupervisedRun {
  exit: BuildExit;
  interrupted: boolean;
  supervisorFailed: boolean;
  results: NativeExecResults;
  /** from CMD's start to its first call kreplay held; null: none was held */
  firstHeldNs: bigint | null;
  /** the daemon's session; null without a daemon */
  sessionId: string | null;
}

export interface BuildToSupervise {
  source: IncidentSource;
  argv: string[];
  flags: ExecFlags;
  server: string | null;
  plan: readonly PlanTarget[];
  schedule: Schedule;
}

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

export async function superviseBuild({
  source,
  argv,
  flags,
  server,
  plan,
  schedule,
}: BuildToSupervise): Promise<SupervisedRun> {
  const build = LaunchedBuild.start(argv);
  let supervisor: NativeExecSupervisor | null = null;
  let link: SessionLink | null = null;
  let session: DaemonSession | null = null;
  let supervisorFailed = false;
  let ended!: () => void;
  const supervisorEnded = new Promise<void>((resolve) => (ended = resolve));
  try {
    // the daemon's side is loaded only with a daemon: a CI job's replay starts without it
    if (server)
      session = await (
        await import('./daemon-session')
      ).DaemonSession.create(server, source, flags, argv, build.pid);
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
          ambiguous: t.ambiguous,
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
      const { SessionLink } = await import('./session-link');
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
  return { exit, interrupted, supervisorFailed, results, firstHeldNs, sessionId: session?.id ?? null };
}

const bigMax = (a: bigint, b: bigint) => (a > b ? a : b);
