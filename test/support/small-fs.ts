/** A small tmpfs of the test's own, to run the agent out of disk space for real. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SmallFs {
  path: string;
  freeBytes(): number;
  /** writes a file that leaves about `leaveBytes` free; returns its path */
  fill(leaveBytes: number): string;
  remove(): void;
}

export function mountSmallFs(sizeMiB: number): SmallFs {
  const path = mkdtempSync(join(tmpdir(), 'kreplay-smallfs-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMiB}m`, 'tmpfs', path]);
  const freeBytes = () => {
    const fs = statfsSync(path);
    return fs.bavail * fs.bsize;
  };
  return {
    path,
    freeBytes,
    fill(leaveBytes) {
      const filler = join(path, `filler-${Date.now()}`);
      writeFileSync(filler, Buffer.alloc(Math.max(0, freeBytes() - leaveBytes)));
      return filler;
    },
    remove() {
      execFileSync('umount', ['-l', path]);
      rmSync(path, { recursive: true, force: true });
    },
  };
}
