/**
 * cgroup v2 id -> path. The kernel reports bpf_get_current_cgroup_id(), the
 * inode number of the task's cgroup directory; walking the cgroup2 mount
 * maps it back for processes that are already gone when we look.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

function findCgroup2Mount(): string | null {
  try {
    for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
      const fields = line.split(' ');
      const dash = fields.indexOf('-');
      if (dash > 0 && fields[dash + 1] === 'cgroup2') return fields[4] ?? null;
    }
  } catch {
    // no /proc: nothing to map
  }
  return null;
}

export class CgroupPaths {
  private readonly paths = new Map<number, string>();
  private lastScanMs = -Infinity;

  constructor(
    private readonly mount: string | null = findCgroup2Mount(),
    private readonly minRescanMs = 1000,
  ) {}

  pathOf(cgroupId: number): string | null {
    const known = this.paths.get(cgroupId);
    if (known !== undefined || !this.mount) return known ?? null;
    const now = performance.now();
    if (now - this.lastScanMs < this.minRescanMs) return null;
    this.lastScanMs = now;
    this.scan(this.mount, '/');
    return this.paths.get(cgroupId) ?? null;
  }

  /** A process's cgroup v2 id (what the kernel filter sees), null when unknown. */
  idOfProcess(pid: number): bigint | null {
    if (!this.mount) return null;
    try {
      const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
        .split('\n')
        .find((l) => l.startsWith('0::'));
      return line === undefined ? null : BigInt(statSync(join(this.mount, line.slice(3))).ino);
    } catch {
      return null;
    }
  }

  /** Every cgroup now, id -> path, walked afresh (the filter's services and paths resolve from it). */
  all(): Map<number, string> {
    if (this.mount) {
      this.paths.clear();
      this.lastScanMs = performance.now();
      this.scan(this.mount, '/');
    }
    return this.paths;
  }

  private scan(dir: string, path: string): void {
    try {
      this.paths.set(statSync(dir).ino, path);
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (entry.isDirectory())
          this.scan(join(dir, entry.name), path === '/' ? `/${entry.name}` : `${path}/${entry.name}`);
      }
    } catch {
      // a cgroup removed while we walked it
    }
  }
}
