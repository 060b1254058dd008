/**
 * A process's place in the process tree, from /proc: what the runtime hooks need to keep out of
 * the agent's own line (its supervisor, the shell or CI runner that started it).
 */
import { readFileSync, readlinkSync, statSync } from 'node:fs';

export interface ProcessStat {
  ppid: number;
  /** clock ticks after boot: with the pid, tells one process from a later one with the same pid */
  startTime: string;
}

/** /proc/<pid>/stat: the comm (field 2) may hold spaces and parentheses; the fields after it do not. */
export function parseStat(stat: string): ProcessStat | null {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // after the comm: state(3) ppid(4) ... starttime(22)
  const ppid = Number(fields[1]);
  const startTime = fields[19];
  return Number.isInteger(ppid) && startTime !== undefined && /^\d+$/.test(startTime)
    ? { ppid, startTime }
    : null;
}

/** /proc/<pid>/stat, or null when the process is gone or unreadable. */
export function readStat(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
}

/** The longest chain walked: a bound against a loop in what a racing /proc said. */
const MAX_DEPTH = 64;

/**
 * The processes above `pid`, nearest first, up to (not including) init: the agent's are where no
 * hook goes (a hook's ptrace or SIGUSR1 must never stop the supervisor the agent runs under, nor
 * the CI runner that started it). Read anew at each scan: a parent that exits hands the agent on.
 */
export function ancestorsOf(pid: number, stat: (pid: number) => string | null = readStat): number[] {
  const out: number[] = [];
  for (let at = pid; out.length < MAX_DEPTH;) {
    const parsed = parseStat(stat(at) ?? '');
    if (!parsed || parsed.ppid <= 1) break;
    out.push(parsed.ppid);
    at = parsed.ppid;
  }
  return out;
}

/** Why a runtime hook stays out of an ancestor of the agent, said the same for every runtime. */
export const AGENT_ANCESTOR_REASON =
  "it runs above the agent (its supervisor, shell or CI runner): the agent's own line is never hooked";

/**
 * The executable's identity (device and inode): the same file under any path; null for a kernel
 * thread (no executable: asked at every scan, so without the cost of a thrown error) or a process gone.
 */
export function exeIdentity(pid: number): string | null {
  try {
    const st = statSync(`/proc/${pid}/exe`, { throwIfNoEntry: false });
    return st ? `${st.dev}:${st.ino}` : null;
  } catch {
    return null;
  }
}

/**
 * The last pid the kernel handed out (a process's or a thread's) in the reader's pid namespace:
 * /proc/loadavg's last field; null when it cannot be read.
 */
export function lastPid(
  loadavg: () => string = () => readFileSync('/proc/loadavg', 'latin1'),
): number | null {
  try {
    const last = Number(loadavg().trim().split(' ')[4]);
    return Number.isSafeInteger(last) && last >= 0 ? last : null;
  } catch {
    return null;
  }
}

/**
 * Whether /proc shows the agent's own pid namespace (its /proc/self is its pid): only then does
 * lastPid() move with every process /proc lists.
 */
export function procInOwnNamespace(): boolean {
  try {
    return readlinkSync('/proc/self') === String(process.pid);
  } catch {
    return false;
  }
}

/**
 * Whether `pid` was handed out while the kernel's last pid went from `from` to `to`: pids are
 * handed out upwards and wrap around at pid_max.
 */
export function handedOut(pid: number, from: number, to: number): boolean {
  return from <= to ? pid > from && pid <= to : pid > from || pid <= to;
}
