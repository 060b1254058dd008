/** What /proc still tells about a process: its cgroup path and executable. */
import { readFileSync, readlinkSync } from 'node:fs';

/** The process's cgroup paths in /proc/PID/cgroup: the unified (v2) one and name=systemd's (v1, hybrid hosts). */
export function readProcCgroupPaths(
  pid: number,
  procRoot = '/proc',
): { unified: string | null; systemd: string | null } | null {
  let text: string;
  try {
    text = readFileSync(`${procRoot}/${pid}/cgroup`, 'utf8');
  } catch {
    return null;
  }
  let unified: string | null = null;
  let systemd: string | null = null;
  for (const line of text.split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (path === undefined) continue;
    if (controllers === '') unified = path;
    else if (controllers === 'name=systemd') systemd = path;
  }
  return { unified, systemd };
}

/**
 * The process's systemd-visible cgroup path: the unified (v2) path, or on a
 * hybrid host whose v2 tree is empty, the name=systemd v1 path.
 */
export function readProcCgroupPath(pid: number, procRoot = '/proc'): string | null {
  const paths = readProcCgroupPaths(pid, procRoot);
  if (!paths) return null;
  const { unified, systemd } = paths;
  if (unified && unified !== '/') return unified;
  return systemd ?? unified;
}

/** NSpid's last value in /proc/PID/status's text: the pid in the process's own pid namespace (NaN: none said). */
export function innermostPid(statusText: string): number {
  const nspids = /^NSpid:\s*(.*)$/m.exec(statusText)?.[1]?.trim().split(/\s+/) ?? [];
  return Number(nspids[nspids.length - 1] ?? NaN);
}

/** The process's pid in its own pid namespace, or null when /proc no longer tells it. */
export function readInnermostPid(pid: number, procRoot = '/proc'): number | null {
  try {
    const inner = innermostPid(readFileSync(`${procRoot}/${pid}/status`, 'utf8'));
    return Number.isSafeInteger(inner) && inner > 0 ? inner : null;
  } catch {
    return null;
  }
}

export function readExePath(pid: number, procRoot = '/proc'): string | null {
  try {
    return readlinkSync(`${procRoot}/${pid}/exe`);
  } catch {
    return null;
  }
}

/** The innermost systemd service unit on a cgroup path, e.g. "nginx.service". */
export function serviceUnitOf(cgroupPath: string | null): string | null {
  if (!cgroupPath) return null;
  const parts = cgroupPath.split('/');
  for (let i = parts.length - 1; i >= 0; i--) {
    if (parts[i]!.endsWith('.service')) return parts[i]!;
  }
  return null;
}
