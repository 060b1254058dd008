/**
 * Puts the hook (hook.js) into one Node process through its inspector, the way OBI does: SIGUSR1
 * (which Node answers by opening its inspector on 127.0.0.1), the inspector's WebSocket,
 * Runtime.evaluate, then the inspector closed again so nothing is left listening. Every step is
 * checked: the refusals of hook-policy.ts first; SIGUSR1 is never sent to a process whose own
 * listener would get it; the inspector is the one the process itself opened (its socket, among
 * its descriptors); the code runs only after `process.pid` there is the process's.
 */
import type { Logger } from '../../../core/log/logger';
import { hookExpression, hookInstalled } from './hook-signal';
import { hookRefusal } from './hook-policy';
import { deadline, InspectorSession, NodeHookError } from './inspector-session';
import { namespaceListening, processListening, type ListeningSocket } from './listening-sockets';
import { readProcessFacts } from './node-process';
import type { NodeRuntime } from './node-runtime';
import { findSignalListener, processMemory } from './signal-listener';

export type HookOutcome =
  | { kind: 'hooked' }
  | { kind: 'refused'; reason: string; transient: boolean }
  | { kind: 'failed'; reason: string };

export interface InjectorTimings {
  /** for the inspector to open after SIGUSR1, and to close after the hook */
  inspectorMs: number;
  /** for each answer of the inspector */
  answerMs: number;
}

export const INJECTOR_TIMINGS: InjectorTimings = { inspectorMs: 3000, answerMs: 5000 };

const SIGUSR1 = 10;
const POLL_MS = 10;
const DEFAULT_INSPECTOR_PORT = 9229;

/** What a closing evaluate runs: after this answer, so the session it answers on is not waited for. */
const CLOSE_INSPECTOR =
  "setImmediate(() => (typeof process.getBuiltinModule === 'function' ? process.getBuiltinModule : require)('inspector').close()); 'closing'";

/** Why SIGUSR1 must not be sent: its own listener, or no way to tell. */
function listenerRefusal(pid: number, runtime: NodeRuntime): string | null {
  if (runtime.signalTree === null)
    return "cannot tell whether it listens for SIGUSR1 itself (libuv's symbols are stripped)";
  let memory: ReturnType<typeof processMemory>;
  try {
    memory = processMemory(pid);
  } catch (err) {
    return `cannot tell whether it listens for SIGUSR1 itself: ${(err as Error).message}`;
  }
  try {
    const answer = findSignalListener(memory.read, runtime.signalTree, SIGUSR1);
    if (answer === 'listener')
      return "it listens for SIGUSR1 itself (process.on('SIGUSR1')): never signalled";
    if (answer === 'unknown')
      return "cannot tell whether it listens for SIGUSR1 itself (libuv's signal tree is unreadable)";
    return null;
  } finally {
    memory.close();
  }
}

/** The socket the process started listening on since `before`. */
function openedInspector(pid: number, before: Set<number>): ListeningSocket | undefined {
  return processListening(pid).find((s) => !before.has(s.inode));
}

/** Asks `check` every POLL_MS until it gives a value, for at most `ms`; undefined past that. */
async function poll<T>(check: () => T | undefined, ms: number): Promise<T | undefined> {
  const end = performance.now() + ms;
  for (;;) {
    const value = check();
    if (value !== undefined || performance.now() >= end) return value;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/**
 * Hooks process `pid`, which runs `runtime`; `beforeSignal` runs once the policy let it through
 * (the libuv probes go on first). Resolves with what happened; never throws. Waits for each step
 * within `timings`: the caller runs one at a time (the inspector port is shared).
 */
export async function injectNodeHook(
  pid: number,
  runtime: NodeRuntime,
  log: Logger,
  timings: InjectorTimings = INJECTOR_TIMINGS,
  beforeSignal: () => void = () => undefined,
): Promise<HookOutcome> {
  const facts = readProcessFacts(pid);
  if (!facts) return { kind: 'failed', reason: 'the process is gone' };
  const refusal = hookRefusal(facts);
  if (refusal) return { kind: 'refused', ...refusal };
  const listener = listenerRefusal(pid, runtime);
  if (listener) return { kind: 'refused', reason: listener, transient: false };
  const before = new Set(processListening(pid).map((s) => s.inode));
  // the inspector binds 9229 unless told otherwise (then refused above if beyond loopback)
  if (namespaceListening(pid).some((s) => s.port === DEFAULT_INSPECTOR_PORT && !before.has(s.inode)))
    return {
      kind: 'failed',
      reason: `port ${DEFAULT_INSPECTOR_PORT} is taken: its inspector could not open`,
    };
  try {
    beforeSignal();
    process.kill(pid, SIGUSR1);
  } catch (err) {
    return { kind: 'failed', reason: `cannot signal it: ${(err as Error).message}` };
  }
  const inspector = await poll(() => openedInspector(pid, before), timings.inspectorMs);
  if (!inspector) return { kind: 'failed', reason: 'its inspector did not open after SIGUSR1' };
  let session: InspectorSession | undefined;
  let outcome: HookOutcome;
  try {
    session = await InspectorSession.open(inspector.port, timings.answerMs);
    // an inspector set beyond loopback where its options did not show it (process.debugPort): closed, unused
    if (!inspector.loopback) throw new NodeHookError('its inspector opened beyond loopback');
    const seen = await session.evaluate('process.pid');
    if (seen !== facts.innerPid) {
      // never run code in another process; this one opened the port, so it closes it below
      outcome = {
        kind: 'failed',
        reason: `its inspector answered for pid ${String(seen)}, not ${facts.innerPid}`,
      };
    } else {
      const installed = await session.evaluate(hookExpression());
      outcome =
        installed === hookInstalled(facts.innerPid)
          ? { kind: 'hooked' }
          : { kind: 'failed', reason: `the hook answered ${JSON.stringify(installed)}` };
    }
  } catch (err) {
    outcome = { kind: 'failed', reason: (err as Error).message };
  }
  await closeInspector(pid, inspector, session, log, timings);
  return outcome;
}

/**
 * Asks the process to close its inspector (which ends the session from its side: never both sides
 * at once, see InspectorSession.close), then waits until it no longer listens.
 */
async function closeInspector(
  pid: number,
  inspector: ListeningSocket,
  session: InspectorSession | undefined,
  log: Logger,
  timings: InjectorTimings,
): Promise<void> {
  try {
    const closer = session ?? (await InspectorSession.open(inspector.port, timings.answerMs));
    await closer.evaluate(CLOSE_INSPECTOR);
    // a session the process did not end in time is ended from here (it is not closing it, then)
    await deadline(closer.closed, timings.inspectorMs, 'the inspector ending the session').catch(() =>
      closer.close(),
    );
    const gone = await poll(
      () => (processListening(pid).some((s) => s.inode === inspector.inode) ? undefined : true),
      timings.inspectorMs,
    );
    if (!gone)
      throw new NodeHookError(`still listening ${timings.inspectorMs} ms after it was asked to close`);
  } catch (err) {
    log.warn('a Node inspector kreplay opened may still be listening (until the process exits)', {
      pid,
      port: inspector.port,
      error: (err as Error).message,
    });
  }
}
