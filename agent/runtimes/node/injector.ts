/**
 * Puts the hook (hook.js) into one Node process through its inspector, the way OBI does: SIGUSR1
 * (which Node answers by opening its inspector on 127.0.0.1), the inspector's WebSocket,
 * Runtime.evaluate, then the inspector closed again so nothing is left listening (inspector-door.ts,
 * which keeps it the agent's alone with the kernel's guard from before the signal until it is
 * closed for good). Every step is checked: the refusals of hook-policy.ts first; SIGUSR1 is never
 * sent to a process whose own listener would get it, nor while another program holds the port
 * (asked again later); the inspector is the one the process itself opened (its socket, among its
 * descriptors); the code runs only after `process.pid` there is the process's.
 */
import { hookRefusal, inspectorPort, nodeOptions } from './hook-policy';
import type { HookOutcome, InspectorDoors, OpenedOutcome } from './inspector-door';
import { namespaceListening, processListening } from './listening-sockets';
import { readProcessFacts } from './node-process';
import type { NodeRuntime } from './node-runtime';
import { findSignalListener, processMemory } from './signal-listener';

const SIGUSR1 = 10;

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

/**
 * Hooks process `pid`, which runs `runtime`, through `doors` (its inspector guarded from before the
 * signal until closed for good); `beforeSignal` runs once the policy let it through (the libuv
 * probes go on first); `late` gets what happened to one whose inspector opened only after this
 * stopped waiting ('pending'). Resolves with what happened; never throws.
 */
export async function injectNodeHook(
  pid: number,
  runtime: NodeRuntime,
  doors: InspectorDoors,
  beforeSignal: () => void = () => undefined,
  late: (outcome: OpenedOutcome) => void = () => undefined,
): Promise<HookOutcome> {
  const facts = readProcessFacts(pid);
  if (!facts) return { kind: 'failed', reason: 'the process is gone' };
  const refusal = hookRefusal(facts);
  if (refusal) return { kind: 'refused', ...refusal };
  const listener = listenerRefusal(pid, runtime);
  if (listener) return { kind: 'refused', reason: listener, transient: false };
  const port = inspectorPort(nodeOptions(facts.argv, facts.env.NODE_OPTIONS));
  const listening = namespaceListening(pid);
  const before = new Set(processListening(pid, listening).map((s) => s.inode));
  if (listening.some((s) => s.port === port && !before.has(s.inode)))
    return { kind: 'busy', reason: `port ${port} is taken: its inspector could not open` };
  let netns: bigint;
  try {
    netns = doors.guard.netnsOf(pid);
  } catch (err) {
    return { kind: 'failed', reason: `cannot reach its network namespace: ${(err as Error).message}` };
  }
  return doors.enter({ pid, innerPid: facts.innerPid, port, netns, before, late }, () => {
    beforeSignal();
    process.kill(pid, SIGUSR1);
  });
}
