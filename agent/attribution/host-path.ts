/**
 * The host's path to a file a process names in its own root (a container's). readlink of
 * /proc/PID/root says "/" for a root in another mount namespace, so the mounts tell it instead:
 * the process's mount that holds the path (longest mount point, /proc/PID/mountinfo) is a
 * filesystem (major:minor) and a directory in it (root); a host mount of the same filesystem whose
 * root holds that directory reaches the file from the host. The answer is checked (same device and
 * inode as the file reached through /proc/PID/root): a path renamed, removed or not reachable from
 * the host's mounts is null, never another file.
 */
import { readFileSync, statSync } from 'node:fs';

export interface MountEntry {
  /** major:minor of the filesystem */
  device: string;
  /** the directory of the filesystem mounted */
  root: string;
  mountPoint: string;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
const unescape = (field: string) =>
  field.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

export function parseMountInfo(text: string): MountEntry[] {
  const mounts: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    if (fields.length < 5) continue;
    mounts.push({ device: fields[2]!, root: unescape(fields[3]!), mountPoint: unescape(fields[4]!) });
  }
  return mounts;
}

const under = (path: string, dir: string) => dir === '/' || path === dir || path.startsWith(`${dir}/`);
const rest = (path: string, dir: string) => (dir === '/' ? path : path.slice(dir.length));
const join = (dir: string, tail: string) => (dir === '/' ? tail || '/' : dir + tail);

/** Where the host reaches `path` of a process whose mounts are `inside`, from the host's `host` mounts; null if nowhere. */
export function hostPathByMounts(path: string, inside: MountEntry[], host: MountEntry[]): string | null {
  let holder: MountEntry | undefined;
  // the last mount on the longest mount point is the one in effect
  for (const m of inside)
    if (under(path, m.mountPoint) && (!holder || m.mountPoint.length >= holder.mountPoint.length)) holder = m;
  if (!holder) return null;
  const inFs = join(holder.root, rest(path, holder.mountPoint));
  for (const m of host) {
    if (m.device === holder.device && under(inFs, m.root)) return join(m.mountPoint, rest(inFs, m.root));
  }
  return null;
}

export function hostPathOf(pid: number, path: string, procRoot = '/proc'): string | null {
  try {
    const inside = parseMountInfo(readFileSync(`${procRoot}/${pid}/mountinfo`, 'utf8'));
    const host = parseMountInfo(readFileSync(`${procRoot}/self/mountinfo`, 'utf8'));
    const candidate = hostPathByMounts(path, inside, host);
    if (candidate === null) return null;
    const there = statSync(`${procRoot}/${pid}/root${path}`);
    const here = statSync(candidate);
    return there.dev === here.dev && there.ino === here.ino ? candidate : null;
  } catch {
    return null;
  }
}
