/** The Node hook (hook.js): its text is what the agent evaluates in a Node process. */
import type { HookOptions, HookSignal } from './hook-signal';

/** Installs (or installs again) the hook in the process it runs in; what it did, as text. */
declare function kreplayNodeHook(signal: HookSignal, options?: HookOptions): string;
export = kreplayNodeHook;
