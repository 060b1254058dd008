/** A real block device of the test's own: a loop device on a tmpfs file with ext4 on it, mounted. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

export interface LoopDevice {
  device: string; // /dev/loopN
  name: string; // loopN
  major: number;
  minor: number;
  mountPoint: string;
  /** completed requests so far: reads + writes + discards + flushes (/sys/block/<dev>/stat) */
  completedIos(): number;
  remove(): void;
}

export function createLoopDevice(sizeMiB = 64): LoopDevice {
  const dir = mkdtempSync('/dev/shm/kreplay-loop-');
  const image = join(dir, 'disk.img');
  execFileSync('truncate', ['-s', `${sizeMiB}M`, image]);
  const device = execFileSync('losetup', ['-f', '--show', image], { encoding: 'utf8' }).trim();
  const name = device.replace('/dev/', '');
  const [major, minor] = readFileSync(`/sys/block/${name}/dev`, 'utf8').trim().split(':').map(Number);
  const mountPoint = join(dir, 'mnt');
  try {
    execFileSync('mkfs.ext4', ['-q', '-F', device]);
    execFileSync('mkdir', [mountPoint]);
    execFileSync('mount', [device, mountPoint]);
  } catch (err) {
    execFileSync('losetup', ['-d', device]);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    device,
    name,
    major: major!,
    minor: minor!,
    mountPoint,
    completedIos: () => {
      const f = readFileSync(`/sys/block/${name}/stat`, 'utf8').trim().split(/\s+/).map(Number);
      return f[0]! + f[4]! + (f[11] ?? 0) + (f[15] ?? 0);
    },
    remove: () => {
      try {
        execFileSync('umount', [mountPoint]);
      } finally {
        execFileSync('losetup', ['-d', device]);
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
