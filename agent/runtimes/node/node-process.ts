/**
 * What /proc tells of a process the Node hook might go into: whether it runs Node, how it was
 * started, what it opted out of, and whether SIGUSR1 is safe to send it.
 * Reading only: nothing here touches the process.
 */
import { readFileSync } from 'node:fs';
import { innermostPid } from '../../attribution/process-info';

export interface ProcessFacts {
  pid: number;
  /** its pid in its own pid namespace (NSpid's last): what `process.pid` says inside */
  innerPid: number;
  comm: string;
  argv: string[];
  /** the variables the hook cares about */
  env: { KREPLAY_NODE_HOOK?: string; NODE_OPTIONS?: string };
  /** SIGUSR1 is caught (Node's inspector trigger, or the application's own handler) */
  sigusr1Caught: boolean;
}

const SIGUSR1 = 10;

/** "NAME=value\0..." → the values the hook reads. */
export function parseEnviron(text: string): ProcessFacts['env'] {
  const env: ProcessFacts['env'] = {};
  for (const entry of text.split('\0')) {
    const eq = entry.indexOf('=');
    const name = entry.slice(0, eq);
    if (name === 'KREPLAY_NODE_HOOK' || name === 'NODE_OPTIONS') env[name] = entry.slice(eq + 1);
  }
  return env;
}

/** /proc/PID/status: the innermost pid and whether signal `signal` is in SigCgt. */
export function parseStatus(text: string, signal = SIGUSR1): { innerPid: number; caught: boolean } {
  const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(text)?.[1]?.trim() ?? '';
  const caughtMask = BigInt(`0x${field('SigCgt') || '0'}`);
  return {
    innerPid: innermostPid(text),
    caught: ((caughtMask >> BigInt(signal - 1)) & 1n) === 1n,
  };
}

/**
 * /proc/PID/status's Seccomp: whether a filter may refuse, or kill the process for, a system call
 * it does not expect (anything but mode 0; an unreadable status counts as one). The hook then
 * signals only with the write every Node process makes, never with getpriority (hook.js).
 */
export function seccompFiltered(pid: number): boolean {
  try {
    return parseSeccomp(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

/** status's Seccomp field is not 0 (a kernel without seccomp has none: nothing filters there). */
export function parseSeccomp(status: string): boolean {
  const mode = /^Seccomp:\s*(\d+)$/m.exec(status)?.[1];
  return mode !== undefined && mode !== '0';
}

/** The facts of a live process; null when it is gone (or a kernel thread). */
export function readProcessFacts(pid: number): ProcessFacts | null {
  try {
    const status = parseStatus(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return {
      pid,
      innerPid: status.innerPid,
      comm: readFileSync(`/proc/${pid}/comm`, 'utf8').trimEnd(),
      argv: readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1),
      env: parseEnviron(readFileSync(`/proc/${pid}/environ`, 'latin1')),
      sigusr1Caught: status.caught,
    };
  } catch {
    return null;
  }
}

/** Where the files a process maps start, from its /proc/PID/maps: path -> the lowest address of a mapping at file offset 0. */
export function mappedFiles(maps: string): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (const line of maps.split('\n')) {
    // start-end perms offset dev inode path
    const m = /^([0-9a-f]+)-[0-9a-f]+ \S+ ([0-9a-f]+) \S+ \d+\s+(\/.*)$/.exec(line);
    if (!m || BigInt(`0x${m[2]}`) !== 0n) continue;
    const start = BigInt(`0x${m[1]}`);
    const known = out.get(m[3]!);
    if (known === undefined || start < known) out.set(m[3]!, start);
  }
  return out;
}
