/**
 * The Node injector of the process discovery (agent/runtimes/discovery): hooks each Node process
 * it is handed through its inspector (injector.ts), kept the agent's alone by the kernel's guard
 * and watched until it is closed for good (inspector-door.ts). A refusal that may pass (SIGUSR1 not
 * caught yet, just after exec) is asked again at the next scans; a port another program holds is
 * waited for; a process whose inspector opens only later is answered then; what cannot be hooked
 * stays unattributed, refused (the policy said no before anything was sent) or failed (a step
 * after it went wrong).
 */
import type { Logger } from '../../../core/log/logger';
import type { NativeAddon } from '../../../core/native/addon';
import type { FinalResult, FoundProcess, InjectResult, RuntimeInjector } from '../discovery/runtime-hook';
import { injectNodeHook } from './injector';
import { InspectorDoors, type InjectorTimings, type OpenedOutcome } from './inspector-door';
import { InspectorGuard } from './inspector-guard';
import type { NodeRuntime } from './node-runtime';

export interface NodeHookOptions {
  /** follows the process's libuv threadpool (its probes go on its binary before the hook goes in) */
  followLibuv(pid: number): void;
  addon: Pick<NativeAddon, 'InspectorGuard'>;
  log: Logger;
  timings?: InjectorTimings;
}

/** Scans a process whose refusal may pass is asked again (Node installs its SIGUSR1 handler some milliseconds after exec). */
const TRANSIENT_TRIES = 10;
/** How long a stop waits for the inspectors being closed (inspector-door.ts) before letting them go. */
const STOP_WATCH_MS = 4000;

type NodeProcess = FoundProcess<{ runtime: 'node'; node: NodeRuntime }>;

/** What the discovery counts of what came of an inspector. */
function finalResult(outcome: OpenedOutcome): FinalResult {
  return outcome.kind === 'hooked' ? { outcome: 'hooked' } : { outcome: 'failed', reason: outcome.reason };
}

export class NodeHookInjector implements RuntimeInjector<NodeProcess['classification']> {
  readonly maxTries = TRANSIENT_TRIES;
  readonly hookedMessage = 'hooked a Node process: its requests are followed';
  private doors: InspectorDoors | null = null;
  /** why no inspector can be guarded here: every Node process refused with it */
  private unguarded: string | null = null;

  constructor(private readonly options: NodeHookOptions) {}

  /** Connects to a hooked process's inspector the kernel refused (inspector-guard.ts). */
  get intrusions(): number {
    return this.doors?.guard.intrusions ?? 0;
  }

  /** Lines Node printed on hooked programs' stderr for the agent's inspectors (docs/operate.md). */
  get stderrLines(): number {
    return this.doors?.stderrLines ?? 0;
  }

  /** Opens the kernel's guard of the inspectors; without it no Node process is hooked. */
  start(): void {
    try {
      const guard = InspectorGuard.open(this.options.addon, this.options.log);
      this.doors = new InspectorDoors(guard, this.options.log, this.options.timings);
    } catch (err) {
      this.unguarded = `its inspector cannot be guarded (${(err as Error).message})`;
      this.options.log.warn('no Node process is hooked: their inspectors cannot be guarded', {
        error: (err as Error).message,
      });
    }
  }

  /** Resolves once the inspectors still watched are closed (or let go, logged), and the guard is gone. */
  async stop(): Promise<void> {
    await this.doors?.stop(STOP_WATCH_MS);
    this.doors?.guard.close();
  }

  async inject(
    { pid, classification }: NodeProcess,
    late: (result: FinalResult) => void,
  ): Promise<InjectResult> {
    if (!this.doors) return { outcome: 'refused', reason: this.unguarded ?? 'the Node hook is not started' };
    const outcome = await injectNodeHook(
      pid,
      classification.node,
      this.doors,
      () => this.options.followLibuv(pid),
      (opened) => late(finalResult(opened)),
    );
    switch (outcome.kind) {
      case 'hooked':
      case 'failed':
        return finalResult(outcome);
      case 'busy':
        return { outcome: 'wait', reason: `its inspector port (${outcome.reason})` };
      case 'pending':
        return { outcome: 'pending' };
      case 'refused':
        return outcome.transient
          ? { outcome: 'retry', then: { outcome: 'refused', reason: outcome.reason } }
          : { outcome: 'refused', reason: outcome.reason };
    }
  }
}
