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
