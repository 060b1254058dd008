/**
 * The Node injector of the process discovery (agent/runtimes/discovery): hooks each Node process
 * it is handed through its inspector (injector.ts). A refusal that may pass (SIGUSR1 not caught
 * yet, just after exec) is asked again at the next scans; what cannot be hooked stays unattributed,
 * refused (the policy said no before anything was sent) or failed (a step after it went wrong).
 */
import type { Logger } from '../../../core/log/logger';
import type { FoundProcess, InjectResult, RuntimeInjector } from '../discovery/runtime-hook';
import { injectNodeHook, type InjectorTimings } from './injector';
import type { NodeRuntime } from './node-runtime';

export interface NodeHookOptions {
  /** follows the process's libuv threadpool (its probes go on its binary before the hook goes in) */
  followLibuv(pid: number): void;
  log: Logger;
  timings?: InjectorTimings;
}

/** Scans a process whose refusal may pass is asked again (Node installs its SIGUSR1 handler some milliseconds after exec). */
const TRANSIENT_TRIES = 10;

type NodeProcess = FoundProcess<{ runtime: 'node'; node: NodeRuntime }>;

export class NodeHookInjector implements RuntimeInjector<NodeProcess['classification']> {
  readonly maxTries = TRANSIENT_TRIES;
  readonly hookedMessage = 'hooked a Node process: its requests are followed';

  constructor(private readonly options: NodeHookOptions) {}

  async inject({ pid, classification }: NodeProcess): Promise<InjectResult> {
    const outcome = await injectNodeHook(
      pid,
      classification.node,
      this.options.log,
      this.options.timings,
      () => this.options.followLibuv(pid),
    );
    if (outcome.kind === 'hooked') return { outcome: 'hooked' };
    if (outcome.kind === 'failed') return { outcome: 'failed', reason: outcome.reason };
    return outcome.transient
      ? { outcome: 'retry', then: { outcome: 'refused', reason: outcome.reason } }
      : { outcome: 'refused', reason: outcome.reason };
  }
}
