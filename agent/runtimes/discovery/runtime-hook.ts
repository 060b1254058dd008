/**
 * What the one process discovery (process-discovery.ts) and the runtimes' injectors say to each
 * other: the runtimes it tells apart, what an injector answers for one process, and the one count
 * of those answers (kreplay_agent_runtime_hooks_total{runtime,outcome}).
 */
import type { NodeRuntime } from '../node/node-runtime';
import type { PythonVersion } from '../python/python-process';

export const RUNTIMES = ['node', 'python', 'go', 'jvm'] as const;
export type RuntimeName = (typeof RUNTIMES)[number];

/** What a runtime is called in the log. */
export const RUNTIME_LABELS: Record<RuntimeName, string> = {
  node: 'Node',
  python: 'Python',
  go: 'Go',
  jvm: 'JVM',
};

/** What a process runs, with what its injector needs of it. */
export type Classification =
  | { runtime: 'node'; node: NodeRuntime }
  | { runtime: 'python'; version: PythonVersion }
  | { runtime: 'go' }
  | { runtime: 'jvm' };

/**
 * How a process ends up, each counted once per process (a program an exec replaced is another):
 * - hooked: the hook went in (Python: was queued; the JVM: loaded by its attach);
 * - refused: left alone before anything was sent (its policy, the agent's own line, opted out);
 * - failed: a step after that went wrong;
 * - out_of_scope: the capture filters, --hook-include/--hook-exclude or the default scope leave it
 *   out for now (it is looked at again at every scan, and counted again if it comes in later);
 * - no_hook: its runtime has no hook (Go is followed by uprobes).
 */
export const HOOK_OUTCOMES = ['hooked', 'refused', 'failed', 'out_of_scope', 'no_hook'] as const;
export type HookOutcome = (typeof HOOK_OUTCOMES)[number];

/** A process the discovery hands to its runtime's injector. */
export interface FoundProcess<C extends Classification = Classification> {
  pid: number;
  /** its executable's path as /proc/PID/exe names it */
  exe: string;
  classification: C;
}

/** An answer the discovery counts: the process's outcome. */
export type FinalResult =
  { outcome: 'hooked' } | { outcome: 'refused' | 'failed' | 'no_hook'; reason: string };

/** What an injector answers for one process. */
export type InjectResult =
  | FinalResult
  /** not now (its runtime is starting, no safe point): asked again at the next scans, then `then` */
  | { outcome: 'retry'; then: { outcome: 'refused' | 'failed'; reason: string } }
  /**
   * another program holds what its hook needs (Node: its inspector port): asked again with backoff
   * for as long as it runs, never given up (not one of maxTries)
   */
  | { outcome: 'wait'; reason: string }
  /** under way past this scan (Node: its inspector not open yet): its `late` answer is counted then */
  | { outcome: 'pending' }
  /** it left while looked at: nothing to count */
  | { outcome: 'gone' };

export interface RuntimeInjector<C extends Classification = Classification> {
  /** how many scans a process answering `retry` is asked at most */
  readonly maxTries: number;
  /** what the log says when the hook went in */
  readonly hookedMessage: string;
  /** with the discovery's start and stop (what the injector holds for the whole run) */
  start?(): void;
  stop?(): Promise<void>;
  inject(found: FoundProcess<C>, late: (result: FinalResult) => void): Promise<InjectResult>;
}

/** One injector per runtime. */
export type RuntimeInjectors = {
  [R in RuntimeName]: RuntimeInjector<Extract<Classification, { runtime: R }>>;
};

export type RuntimeHookCounts = Record<RuntimeName, Record<HookOutcome, number>>;

export function zeroHookCounts(): RuntimeHookCounts {
  const counts = {} as RuntimeHookCounts;
  for (const runtime of RUNTIMES)
    counts[runtime] = Object.fromEntries(HOOK_OUTCOMES.map((o) => [o, 0])) as Record<HookOutcome, number>;
  return counts;
}

const OUTCOME_KEYS = {
  refused: 'Refused',
  failed: 'Failed',
  out_of_scope: 'OutOfScope',
  no_hook: 'NoHook',
} as const satisfies Record<Exclude<HookOutcome, 'hooked'>, string>;

/**
 * A count's name among the agent's counters, stored in snake_case: node_hooked, node_hook_refused
 * (the names the Node and Python counts had before the discovery counted every runtime).
 */
export type RuntimeHookKey =
  `${RuntimeName}Hooked` | `${RuntimeName}Hook${(typeof OUTCOME_KEYS)[keyof typeof OUTCOME_KEYS]}`;
export type RuntimeHookCounters = Record<RuntimeHookKey, number>;

export function runtimeHookKey(runtime: RuntimeName, outcome: HookOutcome): RuntimeHookKey {
  return outcome === 'hooked' ? `${runtime}Hooked` : `${runtime}Hook${OUTCOME_KEYS[outcome]}`;
}

/** The counts as the agent's flat counters (zeros when no discovery runs). */
export function runtimeHookCounters(counts: RuntimeHookCounts = zeroHookCounts()): RuntimeHookCounters {
  const out = {} as RuntimeHookCounters;
  for (const runtime of RUNTIMES)
    for (const outcome of HOOK_OUTCOMES) out[runtimeHookKey(runtime, outcome)] = counts[runtime][outcome];
  return out;
}
