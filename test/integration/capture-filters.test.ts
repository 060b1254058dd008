/** The kernel-side filters: this process, --include/--exclude (pid, cgroup, comm), transactions kept, sampling, minimum duration. */
import { execFileSync, spawn } from 'node:child_process';
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
import { readlinkSync, readdirSync } from 'node:fs';
import { EVENT_CONTEXT_ONLY, EVENT_SAMPLE_IN_USER } from '../../core/model';
import type { DecodedContext, DecodedRecord, DecodedSysWrite } from '../support/decode-records';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';
import { captureAround, describeKernel, runToExit } from './capture-harness';

const dir = useTempDir();

const sysWrites = (records: DecodedRecord[]): DecodedSysWrite[] =>
  records.filter((r): r is DecodedSysWrite => r.type === 'sys_write');

/**
 * The byte counts of a process's writes after it exec'd `comm`, in order
 * (before exec the child still has the test runner's comm).
 */
const countsOf = (records: DecodedRecord[], pid: number, comm: string) =>
  sysWrites(records)
    .filter((w) => w.pid === pid && w.comm === comm)
    .map((w) => w.count);

/** A shell whose comm is `comm` (a symlink to /bin/sh under that name). */
function shellNamed(comm: string): string {
  const shell = join(dir.path, comm);
  symlinkSync('/bin/sh', shell);
  return shell;
}

/** A cgroup of the test's own, removed after fn. */
async function withCgroup<T>(name: string, fn: (path: string, id: bigint) => Promise<T>): Promise<T> {
  const { root, mounted } = cgroup2Root(join(dir.path, `cgroup2-${name}`));
  const group = join(root, `kreplay-${name}-${process.pid}`);
  mkdirSync(group);
  try {
    return await fn(group, statSync(group, { bigint: true }).ino);
  } finally {
    rmdirSync(group);
    if (mounted) execFileSync('umount', [root]);
  }
}

/** The shell enters the cgroup (that write happens before it is in), then writes "hi\n". */
const enterAndWrite = (group: string, out: string) =>
  `echo $$ > ${join(group, 'cgroup.procs')}; echo hi > ${out}`;

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
      // filterTransactions: other processes' writes in a transaction would be kept too
      const { records, value: shPid } = await captureAround(
        { include: [{ cgroupId }], filterTransactions: true },
        () => runToExit('sh', ['-c', script]),
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
    // filterTransactions: other processes' writes in a transaction would be kept too
    const { records, value: pid } = await captureAround(
      { include: [{ comm }], filterTransactions: true },
      () => runToExit(shell, ['-c', `echo hi > ${out}`]),
    );
    const writes = sysWrites(records);
    expect(writes.filter((w) => w.pid === pid).map((w) => w.count)).toEqual([3]);
    expect(writes.every((w) => w.comm === comm)).toBe(true);
  });

  it('leaves out excluded comms and cgroups, keeps the rest', async () => {
    await withCgroup('excluded', async (group, cgroupId) => {
      const out = join(dir.path, 'out');
      const excludedShell = shellNamed('kr-excluded');
      const keptShell = shellNamed('kr-kept');
      const { records, value: pids } = await captureAround(
        { exclude: [{ comm: 'kr-excluded' }, { cgroupId }] },
        async () => ({
          byComm: await runToExit(excludedShell, ['-c', `echo hi > ${out}`]),
          byCgroup: await runToExit(keptShell, ['-c', enterAndWrite(group, out)]),
          kept: await runToExit(keptShell, ['-c', `echo hi > ${out}`]),
        }),
      );
      expect(countsOf(records, pids.byComm, 'kr-excluded')).toEqual([]);
      // only the write that moved it into the excluded cgroup (its pid and a newline)
      expect(countsOf(records, pids.byCgroup, 'kr-kept')).toEqual([String(pids.byCgroup).length + 1]);
      expect(countsOf(records, pids.kept, 'kr-kept')).toEqual([3]);
    });
  });

  it('with includes keeps only what one of them names, and an exclusion wins over them', async () => {
    await withCgroup('included', async (group, cgroupId) => {
      const out = join(dir.path, 'out');
      const byComm = shellNamed('kr-inc-comm');
      const both = shellNamed('kr-inc-but-ex');
      const other = shellNamed('kr-other');
      const { records, value: pids } = await captureAround(
        {
          include: [{ comm: 'kr-inc-comm' }, { comm: 'kr-inc-but-ex' }, { cgroupId }],
          exclude: [{ comm: 'kr-inc-but-ex' }],
        },
        async () => ({
          byComm: await runToExit(byComm, ['-c', `echo hi > ${out}`]),
          byCgroup: await runToExit(other, ['-c', enterAndWrite(group, out)]),
          both: await runToExit(both, ['-c', `echo hi > ${out}`]),
          other: await runToExit(other, ['-c', `echo hi > ${out}`]),
        }),
      );
      expect(countsOf(records, pids.byComm, 'kr-inc-comm')).toEqual([3]);
      // the write into cgroup.procs came before it was in the included cgroup
      expect(countsOf(records, pids.byCgroup, 'kr-other')).toEqual([3]);
      expect(countsOf(records, pids.both, 'kr-inc-but-ex')).toEqual([]);
      expect(countsOf(records, pids.other, 'kr-other')).toEqual([]);
      const ours = new Set(Object.values(pids));
      expect(sysWrites(records).some((w) => ours.has(w.pid) && (w.syscall & EVENT_CONTEXT_ONLY) !== 0)).toBe(
        false,
      );
    });
  });

  it('follows the cgroup ids set while it runs', async () => {
    await withCgroup('live', async (group, cgroupId) => {
      const out = join(dir.path, 'out');
      const { records, value: pids } = await captureAround(
        { include: [], liveCgroups: true },
        async (capture) => {
          const before = await runToExit('sh', ['-c', enterAndWrite(group, out)]);
          capture.setCgroupFilter([cgroupId], []);
          const included = await runToExit('sh', ['-c', enterAndWrite(group, out)]);
          capture.setCgroupFilter([], [cgroupId]);
          const after = await runToExit('sh', ['-c', enterAndWrite(group, out)]);
          return { before, included, after };
        },
      );
      expect(countsOf(records, pids.before, 'sh')).toEqual([]);
      expect(countsOf(records, pids.included, 'sh')).toEqual([3]);
      expect(countsOf(records, pids.after, 'sh')).toEqual([]);
    });
  });

  describe('the verdict each CPU keeps for the task it last judged', () => {
    interface Memo {
      tgid: number;
      comm: string;
      wanted: boolean;
    }

    /** This process's capture's filter_verdicts map, by the map fds it holds. */
    function memoMapId(): number {
      for (const fd of readdirSync('/proc/self/fd')) {
        let link: string;
        try {
          link = readlinkSync(`/proc/self/fd/${fd}`);
        } catch {
          continue;
        }
        if (link !== 'anon_inode:bpf-map') continue;
        const id = /^map_id:\s+(\d+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))?.[1];
        const map =
          id &&
          (JSON.parse(execFileSync('bpftool', ['-j', 'map', 'show', 'id', id]).toString()) as {
            name?: string;
          });
        if (map && map.name === 'filter_verdicts') return Number(id);
      }
      throw new Error('the capture holds no filter_verdicts map');
    }

    /** Thread `tid`'s memo slot on `cpu` (struct kr_verdict_memo: seq, tgid, comm[16], wanted; 64 slots). */
    function memoOn(mapId: number, cpu: number, tid: number): Memo {
      const entries = JSON.parse(
        execFileSync('bpftool', ['-j', 'map', 'dump', 'id', String(mapId)]).toString(),
      ) as {
        values: { cpu: number; value: string[] }[];
        key: string[];
      }[];
      const entry = entries.find((e) => parseInt(e.key[0]!, 16) === tid % 64);
      const raw = Buffer.from(entry!.values.find((v) => v.cpu === cpu)!.value.map((b) => parseInt(b, 16)));
      return {
        tgid: raw.readUInt32LE(4),
        comm: raw.subarray(8, 24).toString('latin1').replace(/\0+$/, ''),
        wanted: raw.readUInt32LE(24) !== 0,
      };
    }

    it('holds the tgid, comm and verdict of the task writing there, so its next write skips the lookups', async () => {
      const yes = execFileSync('sh', ['-c', 'command -v yes'], { encoding: 'utf8' }).trim();
      const named = (comm: string) => {
        const path = join(dir.path, comm);
        symlinkSync(yes, path);
        return path;
      };
      const inside = named('kr-memo-in');
      const outside = named('kr-memo-out');
      await captureAround({ include: [{ comm: 'kr-memo-in' }], filterTransactions: true }, async () => {
        const mapId = memoMapId();
        // one after the other on CPU 0: each writes to /dev/null as fast as it can, so that CPU's memo is
        // its own whenever no other task's write came last there
        for (const [path, comm, wanted] of [
          [inside, 'kr-memo-in', true],
          [outside, 'kr-memo-out', false],
        ] as const) {
          const loop = spawn('taskset', ['-c', '0', path], { stdio: 'ignore' });
          try {
            const tgid = loop.pid!;
            await waitFor(
              () => {
                const memo = memoOn(mapId, 0, tgid);
                return memo.tgid === tgid && memo.comm === comm && memo.wanted === wanted;
              },
              {
                timeoutMs: 20_000,
                what: () => `CPU 0's memo of ${comm} (${tgid}): ${JSON.stringify(memoOn(mapId, 0, tgid))}`,
              },
            );
          } finally {
            loop.kill('SIGKILL');
            await new Promise((resolve) => loop.once('exit', resolve));
          }
        }
      });
    }, 60_000);

    it('judges each write by the comm its task has at that write, renamed between two on one CPU', async () => {
      const shell = shellNamed('kr-rename-in');
      const out = join(dir.path, 'out');
      const { records, value: pid } = await captureAround(
        { include: [{ comm: 'kr-rename-in' }], filterTransactions: true },
        () =>
          runToExit('taskset', [
            ...['-c', '0', shell, '-c'],
            `echo a > ${out}; printf kr-rename-out > /proc/$$/comm; echo b >> ${out}; ` +
              `printf kr-rename-in > /proc/$$/comm; echo c >> ${out}`,
          ]),
      );
      // the first rename is written while the comm is still the included one; the second is not
      expect(
        sysWrites(records)
          .filter((w) => w.pid === pid)
          .map((w) => w.count),
      ).toEqual([2, 13, 2]);
    });
  });

  describe('transaction events of excluded tasks', () => {
    // a marker opens transaction T, two writes in it, a bare marker closes it, one write after
    const script = (out: string) =>
      `printf 'KREPLAY-CTX txn=T' > /dev/null; echo in-txn > ${out}; echo more >> ${out}; ` +
      `printf KREPLAY-CTX > /dev/null; echo after > ${out}`;

    it('are kept, flagged for user space to check their context', async () => {
      const shell = shellNamed('kr-txn-excluded');
      const { records, value: pid } = await captureAround({ exclude: [{ comm: 'kr-txn-excluded' }] }, () =>
        runToExit(shell, ['-c', script(join(dir.path, 'out'))]),
      );
      const contexts = records.filter((r): r is DecodedContext => r.type === 'context' && r.pid === pid);
      expect(contexts.map((c) => c.data.toString())).toEqual(['KREPLAY-CTX txn=T', 'KREPLAY-CTX']);
      const writes = sysWrites(records).filter((w) => w.pid === pid && w.comm === 'kr-txn-excluded');
      // the kernel cannot tell a closing marker's context from a transaction: user space drops those
      expect(writes.map((w) => [w.count, w.contextId])).toEqual([
        [17, contexts[0]!.contextId],
        [7, contexts[0]!.contextId],
        [5, contexts[0]!.contextId],
        [11, contexts[1]!.contextId],
        [6, contexts[1]!.contextId],
      ]);
      expect(writes.every((w) => (w.syscall & EVENT_CONTEXT_ONLY) !== 0)).toBe(true);
    });

    it('are left out too with filterTransactions, the task not looked at at all', async () => {
      const shell = shellNamed('kr-txn-filtered');
      const { records, value: pid } = await captureAround(
        { exclude: [{ comm: 'kr-txn-filtered' }], filterTransactions: true },
        () => runToExit(shell, ['-c', script(join(dir.path, 'out'))]),
      );
      expect(countsOf(records, pid, 'kr-txn-filtered')).toEqual([]);
      // its markers set no context either: an excluded write costs the filter's lookups only
      expect(records.filter((r) => r.type === 'context' && r.pid === pid)).toEqual([]);
    });
  });

  it('samples writes without a context one in N and counts the rest; writes with a context all pass', async () => {
    const oneIn = 10;
    const background = 20_000;
    const shell = shellNamed('kr-sample-sh');
    const dd = join(dir.path, 'kr-sample-dd');
    symlinkSync(execFileSync('sh', ['-c', 'command -v dd'], { encoding: 'utf8' }).trim(), dd);
    const ddRun = (bs: number, count: number) =>
      `${dd} if=/dev/zero of=/dev/null bs=${bs} count=${count} status=none`;
    const script = [
      ddRun(2, background),
      `printf 'KREPLAY-CTX txn=S' > /dev/null`,
      ddRun(3, 500),
      'printf KREPLAY-CTX > /dev/null',
      ddRun(5, 200),
    ].join('; ');
    const { records, counters } = await captureAround(
      { include: [{ comm: 'kr-sample-sh' }, { comm: 'kr-sample-dd' }], sampleBackground: oneIn },
      () => runToExit(shell, ['-c', script]),
    );
    const writes = sysWrites(records).filter((w) => w.comm === 'kr-sample-dd');
    const kept = (count: number) => writes.filter((w) => w.count === count);
    // Binomial(20000, 1/10): mean 2000, sigma 42.4; 5 sigma either side
    const sigma = Math.sqrt(background * (1 / oneIn) * (1 - 1 / oneIn));
    expect(Math.abs(kept(2).length - background / oneIn)).toBeLessThan(5 * sigma);
    expect(kept(2).every((w) => (w.syscall & EVENT_SAMPLE_IN_USER) === 0)).toBe(true);
    // every write the kernel left out is counted, exactly
    expect(counters.sysWriteSampledOut).toBe(background - kept(2).length);
    expect(kept(3)).toHaveLength(500);
    // a context that may hold nothing (here a closing marker): user space samples these
    expect(kept(5)).toHaveLength(200);
    expect(kept(5).every((w) => (w.syscall & EVENT_SAMPLE_IN_USER) !== 0)).toBe(true);
  });

  it('drops calls shorter than the minimum duration', async () => {
    const fd = openSync(join(dir.path, 'out'), 'w');
    const { records } = await captureAround(
      {
        excludeSelf: false,
        include: [{ pid: process.pid }],
        filterTransactions: true,
        minDurationNs: 10_000_000_000,
      },
      () => {
        for (let i = 0; i < 10; i++) writeSync(fd, 'quick');
      },
    );
    closeSync(fd);
    expect(sysWrites(records).filter((w) => w.fd === fd)).toEqual([]);
  });
});
