/**
 * The inspector of a Node process the agent signalled, from SIGUSR1 until it is closed for good,
 * guarded all along (inspector-guard.ts: the agent's alone).
 *
 * Node answers SIGUSR1 on a thread of its own (SignalInspector), which asks the main thread to
 * open the inspector twice over: a V8 interrupt (taken at the next check of running JavaScript)
 * and a libuv async (taken at the next turn of the event loop). Whichever comes first opens it;
 * the other finds it open and does nothing, unless the inspector was closed in between: then it
 * opens it again, under a new id. And while the main thread runs neither (blocked in execSync, a
 * synchronous loop), nothing opens until it returns, seconds or minutes later. So:
 *   - the inspector is closed only after a full turn of the loop (two setImmediate), when every
 *     async pending since the signal has run;
 *   - after the close the process is watched for `quietMs`: an inspector it opens again (on the
 *     guarded port) is closed again through a session of the agent's, and the watch goes on;
 *   - a process whose inspector did not open in time stays watched, guarded, for as long as it
 *     lives; when it opens, the hook goes in then (or it is closed), never left listening.
 */
import type { Logger } from '../../../core/log/logger';
import { hookExpression, hookInstalled } from './hook-signal';
import { deadline, InspectorSession, NodeHookError } from './inspector-session';
import type { InspectorGuard } from './inspector-guard';
import { processListening, type ListeningSocket } from './listening-sockets';
import { seccompFiltered } from './node-process';
import { readStat, parseStat } from '../process-tree';
import { Socket } from 'node:net';

export type HookOutcome =
  | { kind: 'hooked' }
  | { kind: 'refused'; reason: string; transient: boolean }
  | { kind: 'failed'; reason: string }
  /** the port is another program's now: asked again later */
  | { kind: 'busy'; reason: string }
  /** signalled, its inspector not open yet: watched, and `late` reports what happened */
  | { kind: 'pending' };

/** What came of an inspector once it opened: the hook went in, or not. */
export type OpenedOutcome = Extract<HookOutcome, { kind: 'hooked' | 'failed' }>;

export interface InjectorTimings {
  /** for the inspector to open after SIGUSR1, and to close after the hook */
  inspectorMs: number;
  /** for each answer of the inspector */
  answerMs: number;
  /** how long a closed inspector is watched for a reopening (default 3000) */
  quietMs?: number;
}

export const INJECTOR_TIMINGS: InjectorTimings = { inspectorMs: 3000, answerMs: 5000 };

const POLL_MS = 10;
const WATCH_MS = 25;
const QUIET_MS = 3000;
/** What Node prints on its stderr for each inspector opened (Debugger listening…, For help…), and each session (Debugger attached.). */
const LINES_PER_OPEN = 2;
const LINES_PER_SESSION = 1;

/**
 * What a closing evaluate runs: after this answer (so the session it answers on is not waited
 * for), and after a full turn of the event loop (see above).
 */
const CLOSE_INSPECTOR =
  "setImmediate(() => setImmediate(() => (typeof process.getBuiltinModule === 'function' ? process.getBuiltinModule : require)('inspector').close())); 'closing'";

/** A process the agent signalled. */
export interface Signalled {
  pid: number;
  /** its pid as it sees it */
  innerPid: number;
  /** the port its inspector opens on, guarded */
  port: number;
  /** its network namespace's cookie (InspectorGuard.netnsOf): where the port is guarded and reached */
  netns: bigint;
  /** the sockets it listened on before the signal */
  before: Set<number>;
  /** what it did when its inspector opened only after the injection stopped waiting */
  late: (outcome: OpenedOutcome) => void;
}

interface Watched {
  target: Signalled;
  /** /proc/PID/stat's start time: the same process, not a later one with its pid */
  startTime: string | undefined;
  release: () => void;
  /** the hook went in, or was given up: an inspector that opens now is only closed */
  done: boolean;
  /** the watch ends at this time (performance.now()) if nothing opens; Infinity while pending */
  quietUntil: number;
  /** a session of the agent's is at it now (the checks leave it alone) */
  busy: boolean;
}

/** Asks `check` every POLL_MS until it gives a value, for at most `ms`; undefined past that. */
export async function poll<T>(check: () => T | undefined, ms: number): Promise<T | undefined> {
  const end = performance.now() + ms;
  for (;;) {
    const value = check();
    if (value !== undefined || performance.now() >= end) return value;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

const startTimeOf = (pid: number): string | undefined => {
  const stat = readStat(pid);
  return stat === null ? undefined : parseStat(stat)?.startTime;
};

export class InspectorDoors {
  /** lines Node printed on the stderr of hooked programs because of the agent */
  stderrLines = 0;
  private readonly watched = new Set<Watched>();
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> = Promise.resolve();

  constructor(
    readonly guard: InspectorGuard,
    private readonly log: Logger,
    private readonly timings: InjectorTimings = INJECTOR_TIMINGS,
  ) {}

  /** Processes still watched. */
  get size(): number {
    return this.watched.size;
  }

  /**
   * Guards the port, runs `signal` (SIGUSR1), waits for the inspector, hooks and closes it; the
   * process stays watched (and the port guarded) until its inspector is closed for good.
   */
  async enter(target: Signalled, signal: () => void): Promise<HookOutcome> {
    const watch: Watched = {
      target,
      startTime: startTimeOf(target.pid),
      release: this.guard.hold(target.port, target.netns),
      done: false,
      quietUntil: Infinity,
      busy: false,
    };
    try {
      signal();
    } catch (err) {
      watch.release();
      return { kind: 'failed', reason: `cannot signal it: ${(err as Error).message}` };
    }
    const inspector = await poll(() => this.opened(watch), this.timings.inspectorMs);
    // watched from here on (not before: the watch's checks would race this for the inspector)
    this.watched.add(watch);
    if (!inspector) {
      this.log.info(
        'a Node process did not open its inspector yet (its main thread is busy): watched, guarded',
        {
          pid: target.pid,
        },
      );
      this.schedule();
      return { kind: 'pending' };
    }
    const outcome = await this.through(watch, inspector);
    this.schedule();
    return outcome;
  }

  /** Stops watching: waits up to `ms` for the watched to close for good, then lets them go (logged). */
  async stop(ms: number): Promise<void> {
    await poll(() => (this.watched.size === 0 ? true : undefined), ms);
    clearTimeout(this.timer);
    await this.checking;
    for (const watch of this.watched) {
      this.log.warn('stopped watching a Node process kreplay signalled: its inspector may still open', {
        pid: watch.target.pid,
        port: watch.target.port,
      });
      watch.release();
    }
    this.watched.clear();
  }

  /**
   * The inspector the process listens on now, on the guarded port, opened since the signal: read
   * in /proc only while the kernel says a socket that started listening there since the hold
   * (the signal's after it) listens still.
   */
  private opened(watch: Watched): ListeningSocket | undefined {
    const { pid, port, netns, before } = watch.target;
    if (!this.guard.listening(port, netns)) return undefined;
    return processListening(pid).find((s) => s.port === port && !before.has(s.inode));
  }

  private schedule(): void {
    if (this.timer !== undefined || this.watched.size === 0) return;
    this.timer = setTimeout(() => {
      this.checking = this.check().finally(() => {
        this.timer = undefined;
        this.schedule();
      });
    }, WATCH_MS);
  }

  private async check(): Promise<void> {
    for (const watch of [...this.watched]) {
      if (watch.busy) continue;
      if (startTimeOf(watch.target.pid) !== watch.startTime) {
        this.end(watch, 'the Node process kreplay signalled ended: its inspector with it');
        continue;
      }
      const inspector = this.opened(watch);
      if (inspector) {
        const first = !watch.done;
        const outcome = await this.through(watch, inspector);
        if (first) watch.target.late(outcome);
        else
          this.log.info('closed a Node inspector that opened again after kreplay closed it', {
            pid: watch.target.pid,
          });
      } else if (performance.now() >= watch.quietUntil)
        this.end(
          watch,
          'the inspector of a Node process kreplay signalled is closed for good: its port unguarded',
        );
    }
  }

  private end(watch: Watched, why: string): void {
    this.watched.delete(watch);
    watch.release();
    this.log.debug(why, { pid: watch.target.pid, port: watch.target.port });
  }

  /** Hooks (the first time) and closes the inspector; the watch then waits `quietMs` for a reopening. */
  private async through(watch: Watched, inspector: ListeningSocket): Promise<OpenedOutcome> {
    watch.busy = true;
    try {
      return await this.use(watch, inspector);
    } finally {
      watch.busy = false;
    }
  }

  private async use(watch: Watched, inspector: ListeningSocket): Promise<OpenedOutcome> {
    const { pid, innerPid } = watch.target;
    const hook = !watch.done;
    watch.done = true;
    this.stderrLines += LINES_PER_OPEN;
    let session: InspectorSession | undefined;
    let outcome: OpenedOutcome = { kind: 'failed', reason: 'its inspector reopened' };
    try {
      session = await InspectorSession.open(inspector.port, this.timings.answerMs, this.dial(pid, inspector));
      this.stderrLines += LINES_PER_SESSION;
      // an inspector set beyond loopback where its options did not show it: closed, unused
      if (!inspector.loopback) throw new NodeHookError('its inspector opened beyond loopback');
      const seen = await session.evaluate('process.pid');
      // never run code in another process; this one opened the port, so it closes it below
      if (seen !== innerPid)
        throw new NodeHookError(`its inspector answered for pid ${String(seen)}, not ${innerPid}`);
      if (hook) {
        const installed = await session.evaluate(hookExpression({ mailbox: !seccompFiltered(pid) }));
        outcome =
          installed === hookInstalled(innerPid)
            ? { kind: 'hooked' }
            : { kind: 'failed', reason: `the hook answered ${JSON.stringify(installed)}` };
      }
    } catch (err) {
      outcome = { kind: 'failed', reason: (err as Error).message };
    }
    await this.close(watch, inspector, session);
    watch.quietUntil = performance.now() + (this.timings.quietMs ?? QUIET_MS);
    return outcome;
  }

  /**
   * Connections to the inspector of process `pid`, made in its network namespace (a container's
   * too) by the agent itself, so the guard lets them through there.
   */
  private dial(pid: number, inspector: ListeningSocket): () => Socket {
    return () =>
      new Socket({ fd: this.guard.connectIn(pid, inspector.port), readable: true, writable: true });
  }

  /**
   * Asks the process to close its inspector (which ends the session from its side: never both
   * sides at once, see InspectorSession.close), then waits until it no longer listens.
   */
  private async close(
    watch: Watched,
    inspector: ListeningSocket,
    session: InspectorSession | undefined,
  ): Promise<void> {
    const { pid, port, netns } = watch.target;
    const { inspectorMs, answerMs } = this.timings;
    try {
      const closer =
        session ?? (await InspectorSession.open(inspector.port, answerMs, this.dial(pid, inspector)));
      if (!session) this.stderrLines += LINES_PER_SESSION;
      // no answer: its JavaScript no longer runs (it is exiting, and Node waits at exit for the
      // sessions to end): this side ends the session, or the process would wait for good
      await closer.evaluate(CLOSE_INSPECTOR).catch((err: unknown) => {
        closer.close();
        throw err;
      });
      // a session the process did not end in time is ended from here (it is not closing it, then)
      await deadline(closer.closed, inspectorMs, 'the inspector ending the session').catch(() =>
        closer.close(),
      );
      const gone = await poll(
        () =>
          this.guard.listening(port, netns) && processListening(pid).some((s) => s.inode === inspector.inode)
            ? undefined
            : true,
        inspectorMs,
      );
      if (!gone) throw new NodeHookError(`still listening ${inspectorMs} ms after it was asked to close`);
    } catch (err) {
      // still watched and guarded: the next check tries again
      this.log.warn('a Node inspector kreplay opened is still listening: guarded, closed again next', {
        pid,
        port: inspector.port,
        error: (err as Error).message,
      });
    }
  }
}
