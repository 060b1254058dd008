/** The kernel-side filters: this process, cgroup, comm and minimum duration. */
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmdirSync,
  statSync,
  symlinkSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import type { DecodedRecord, DecodedSysWrite } from '../support/decode-records';
import { useTempDir } from '../support/temp-dir';
import { captureAround, describeKernel, runToExit } from './capture-harness';

const dir = useTempDir();

const sysWrites = (records: DecodedRecord[]): DecodedSysWrite[] =>
  records.filter((r): r is DecodedSysWrite => r.type === 'sys_write');

/** Where cgroup v2 is mounted, mounting it under dir when nothing has. */
function cgroup2Root(mountDir: string): { root: string; mounted: boolean } {
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [mountInfo, fsInfo] = line.split(' - ');
    if (fsInfo?.startsWith('cgroup2 ')) return { root: mountInfo?.split(' ')[4] as string, mounted: false };
  }
  mkdirSync(mountDir);
  execFileSync('mount', ['-t', 'cgroup2', 'none', mountDir]);
  return { root: mountDir, mounted: true };
}

describeKernel('capture filters', () => {
  it('leaves out this process by default', async () => {
    const fd = openSync(join(dir.path, 'out'), 'w');
    const { records, value: shPid } = await captureAround({}, () => {
      for (let i = 0; i < 10; i++) writeSync(fd, 'mine');
      return runToExit('sh', ['-c', `echo hi > ${join(dir.path, 'theirs')}`]);
    });
    closeSync(fd);
    expect(records.filter((r) => r.type !== 'target' && r.pid === process.pid)).toEqual([]);
    expect(sysWrites(records).filter((w) => w.pid === shPid && w.comm === 'sh')).toHaveLength(1);
  });

  it('keeps only the tasks of one cgroup, with its id', async () => {
    const { root, mounted } = cgroup2Root(join(dir.path, 'cgroup2'));
    const group = join(root, `kreplay-test-${process.pid}`);
    mkdirSync(group);
    try {
      const cgroupId = statSync(group, { bigint: true }).ino;
      const out = join(dir.path, 'in-group');
      const script = `echo $$ > ${join(group, 'cgroup.procs')}; echo hi > ${out}`;
      const { records, value: shPid } = await captureAround({ include: [{ cgroupId }] }, () =>
        runToExit('sh', ['-c', script]),
      );
      const writes = sysWrites(records);
      expect(writes.filter((w) => w.pid === shPid).map((w) => w.count)).toEqual([3]);
      expect(writes.every((w) => w.cgroupId === cgroupId)).toBe(true);
    } finally {
      rmdirSync(group);
      if (mounted) execFileSync('umount', [root]);
    }
  });

  it('keeps only tasks with the given comm', async () => {
    const comm = 'kr-comm-filter';
    const shell = join(dir.path, comm);
    symlinkSync('/bin/sh', shell);
    const out = join(dir.path, 'out');
    const { records, value: pid } = await captureAround({ include: [{ comm }] }, () =>
      runToExit(shell, ['-c', `echo hi > ${out}`]),
    );
    const writes = sysWrites(records);
    expect(writes.filter((w) => w.pid === pid).map((w) => w.count)).toEqual([3]);
    expect(writes.every((w) => w.comm === comm)).toBe(true);
  });

  it('drops calls shorter than the minimum duration', async () => {
    const fd = openSync(join(dir.path, 'out'), 'w');
    const { records } = await captureAround(
      { excludeSelf: false, include: [{ pid: process.pid }], minDurationNs: 10_000_000_000 },
      () => {
        for (let i = 0; i < 10; i++) writeSync(fd, 'quick');
      },
    );
    closeSync(fd);
    expect(sysWrites(records).filter((w) => w.fd === fd)).toEqual([]);
  });
});
