/** The Node hook (hook.js): its text is what the agent evaluates in a Node process. */
import type { HookSignal } from './hook-signal';

/** Installs (or installs again) the hook in the process it runs in; what it did, as text. */
declare function kreplayNodeHook(signal: HookSignal): string;
export = kreplayNodeHook;
