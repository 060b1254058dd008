/**
 * Which daemon owns a saved session. Several daemons may serve one data dir
 * (two on one host, or one restarted while the old one drains); each keeps
 * its own sessions in the shared file and takes over those of a daemon that
 * is gone. A daemon is named by its process (pid and start time, so a reused
 * pid is not mistaken for it) and an instance id (tests run several in one
 * process).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or null if it is gone. */
function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command name (field 2) may hold spaces and parentheses: count from the last ')'
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

/** `pid:start:instance` of this daemon. */
export function newDaemonIdentity(): string {
  return `${process.pid}:${processStart(process.pid)}:${randomUUID()}`;
}

/** Whether the process that `identity` names still runs (not whether that daemon instance is open). */
export function processAlive(identity: string): boolean {
  const [pid, start] = identity.split(':');
  return start !== undefined && processStart(Number(pid)) === start;
}
