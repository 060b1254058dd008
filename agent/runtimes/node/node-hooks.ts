/**
 * The agent's side of Node attribution: finds the Node processes the capture filters include (at
 * start, then every second for those started since, or that exec'd), and hooks each once, one at
 * a time (Node's inspector port is shared). What cannot be hooked stays unattributed, logged once
 * with the reason and counted: refused (the policy said no before anything was sent) or failed (a
 * step after it went wrong).
 */
import { readdirSync } from 'node:fs';
import type { Logger } from '../../../core/log/logger';
import type { NativeAddon } from '../../../core/native/addon';
import { injectNodeHook } from './injector';
import { InspectorDoors, type HookOutcome, type InjectorTimings } from './inspector-door';
import { InspectorGuard } from './inspector-guard';
import { AGENT_ANCESTOR_REASON, ancestorsOf } from '../process-tree';
import { exeIdentity } from './node-process';
import { NodeRuntimes } from './node-runtime';

export interface NodeHookCounts {
  hooked: number;
  refused: number;
  failed: number;
}

export interface NodeHooksOptions {
  /** whether the capture filters include the process */
  wanted(pid: number): boolean;
  /** follows the process's libuv threadpool (its probes go on its binary before the hook goes in) */
  followLibuv(pid: number): void;
  addon: Pick<NativeAddon, 'elfSymbols' | 'InspectorGuard'>;
  log: Logger;
  /** between scans of /proc; default 1000 */
  scanMs?: number;
  timings?: InjectorTimings;
  /** the processes above the agent, never hooked (default: read from /proc at each scan) */
  ancestors?: () => number[];
}

/** How often a process whose refusal may pass (SIGUSR1 not caught yet, just after exec) is asked again. */
const TRANSIENT_TRIES = 5;
/** A process whose inspector port another program holds is asked again after this, doubled each time up to the most. */
const BUSY_RETRY_MS = 1000;
const BUSY_RETRY_MAX_MS = 30_000;
/** How long a stop waits for the inspectors being closed (inspector-door.ts) before letting them go. */
const STOP_WATCH_MS = 4000;

interface Known {
  /** its executable: an exec makes it another program */
  exe: string;
  /** hooked, refused or failed for good, or no Node at all */
  settled: boolean;
  tries: number;
  /** its port was taken: not asked again before this (performance.now()), and the next wait */
  retryAt?: number;
  retryMs?: number;
}

export class NodeHooks {
  readonly counts: NodeHookCounts = { hooked: 0, refused: 0, failed: 0 };
  private readonly runtimes: NodeRuntimes;
  private readonly known = new Map<number, Known>();
  private timer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> = Promise.resolve();
  private stopped = false;
  private doors: InspectorDoors | null = null;

  constructor(private readonly options: NodeHooksOptions) {
    this.runtimes = new NodeRuntimes(options.addon);
  }

  /** Connects to a hooked process's inspector the kernel refused (inspector-guard.ts). */
  get intrusions(): number {
    return this.doors?.guard.intrusions ?? 0;
  }

  /** Lines Node printed on hooked programs' stderr for the agent's inspectors (docs/operate.md). */
  get stderrLines(): number {
    return this.doors?.stderrLines ?? 0;
  }

  /** Starts scanning once the kernel guards the inspectors; without that guard nothing is hooked. */
  start(): void {
    try {
      const guard = InspectorGuard.open(this.options.addon, this.options.log);
      this.doors = new InspectorDoors(guard, this.options.log, this.options.timings);
    } catch (err) {
      this.options.log.warn('no Node process is hooked: their inspectors cannot be guarded', {
        error: (err as Error).message,
      });
      return;
    }
    this.schedule(0);
  }

  /** No new injection starts; resolves once the one under way (if any) has finished, and the inspectors are closed. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.scanning;
    await this.doors?.stop(STOP_WATCH_MS);
    this.doors?.guard.close();
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.scanning = this.scan()
        .catch((err: unknown) =>
          this.options.log.warn('the Node process scan failed', { error: String(err) }),
        )
        .finally(() => this.schedule(this.options.scanMs ?? 1000));
    }, ms);
  }

  private async scan(): Promise<void> {
    const alive = new Set<number>();
    const agentLine = new Set((this.options.ancestors ?? (() => ancestorsOf(process.pid)))());
    for (const name of readdirSync('/proc')) {
      if (this.stopped) return;
      const pid = Number(name);
      if (!Number.isInteger(pid) || pid === process.pid) continue;
      alive.add(pid);
      const exe = exeIdentity(pid);
      if (exe === null) continue;
      let known = this.known.get(pid);
      if (!known || known.exe !== exe) {
        known = { exe, settled: false, tries: 0 };
        this.known.set(pid, known);
      }
      if (known.settled || (known.retryAt ?? 0) > performance.now()) continue;
      const runtime = this.runtimes.of(pid);
      // not Node; or not included yet (a filter's cgroups and services change): asked again next scan
      if (!runtime) known.settled = true;
      if (!runtime || !this.options.wanted(pid)) continue;
      if (agentLine.has(pid)) {
        this.settle(pid, known, { kind: 'refused', reason: AGENT_ANCESTOR_REASON, transient: false });
        continue;
      }
      const outcome = await injectNodeHook(
        pid,
        runtime,
        this.doors!,
        () => this.options.followLibuv(pid),
        (late) => this.settle(pid, known, late),
      );
      this.settle(pid, known, outcome);
    }
    for (const pid of this.known.keys()) if (!alive.has(pid)) this.known.delete(pid);
  }

  private settle(pid: number, known: Known, outcome: HookOutcome): void {
    const log = this.options.log;
    if (outcome.kind === 'refused' && outcome.transient && ++known.tries < TRANSIENT_TRIES) return;
    if (outcome.kind === 'busy') {
      // never given up: another program's inspector or server holds the port for a while
      if (known.retryMs === undefined)
        log.info('a Node process waits for its inspector port', { pid, reason: outcome.reason });
      known.retryMs = Math.min((known.retryMs ?? BUSY_RETRY_MS / 2) * 2, BUSY_RETRY_MAX_MS);
      known.retryAt = performance.now() + known.retryMs;
      return;
    }
    known.settled = true;
    // counted when its inspector opens (the doors call settle again)
    if (outcome.kind === 'pending') return;
    if (outcome.kind === 'hooked') {
      this.counts.hooked++;
      log.info('hooked a Node process: its requests are followed', { pid });
    } else if (outcome.kind === 'refused') {
      this.counts.refused++;
      log.info('left a Node process unattributed', { pid, reason: outcome.reason });
    } else {
      this.counts.failed++;
      log.warn('could not hook a Node process: it stays unattributed', { pid, reason: outcome.reason });
    }
  }
}
