/** The agent's place in the process tree (agent/runtimes/process-tree.ts): plain functions over /proc's text. */
import { spawn } from 'node:child_process';
import {
  ancestorsOf,
  handedOut,
  lastPid,
  parseStat,
  procInOwnNamespace,
  readStat,
} from '../../agent/runtimes/process-tree';

/** /proc/<pid>/stat of a process named `comm` whose parent is `ppid`. */
const statLine = (pid: number, comm: string, ppid: number) =>
  `${pid} (${comm}) S ${ppid} ${pid} ${pid} 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3`;

describe('process-tree', () => {
  it('reads the parent and the start time, a comm with spaces and parentheses included', () => {
    expect(parseStat(statLine(77, 'my (odd) srv', 12))).toEqual({ ppid: 12, startTime: '987654' });
    expect(parseStat('garbage')).toBeNull();
  });

  it('walks up to init, nearest first, and stops where /proc cannot tell or a chain loops', () => {
    const tree = new Map([
      [40, statLine(40, 'kreplay', 30)],
      [30, statLine(30, 'supervisord', 20)],
      [20, statLine(20, 'sh', 1)],
    ]);
    expect(ancestorsOf(40, (pid) => tree.get(pid) ?? null)).toEqual([30, 20]);
    // a parent gone between two reads: what was read so far
    expect(ancestorsOf(40, (pid) => (pid === 30 ? null : (tree.get(pid) ?? null)))).toEqual([30]);
    // a loop (pids reused while it was read) ends at the bound
    const loop = (pid: number) => statLine(pid, 'x', pid === 5 ? 6 : 5);
    expect(ancestorsOf(5, loop)).toHaveLength(64);
  });

  it('finds a real child’s parent: this process', async () => {
    const child = spawn('/bin/sleep', ['30']);
    try {
      await new Promise((resolve) => child.once('spawn', resolve));
      expect(ancestorsOf(child.pid!)[0]).toBe(process.pid);
      expect(ancestorsOf(child.pid!, readStat).slice(1)).toEqual(ancestorsOf(process.pid));
    } finally {
      child.kill();
    }
  });

  it("reads the kernel's last pid, and tells the pids handed out since another, across pid_max's wrap", () => {
    expect(lastPid(() => '0.52 0.58 0.59 2/187 123456\n')).toBe(123456);
    expect(lastPid(() => 'garbage')).toBeNull();
    expect(
      lastPid(() => {
        throw new Error('no /proc');
      }),
    ).toBeNull();
    expect(procInOwnNamespace()).toBe(true);
    expect(lastPid()).toBeGreaterThan(0);
    expect([100, 101, 150, 151].map((pid) => handedOut(pid, 100, 150))).toEqual([false, true, true, false]);
    // wrapped: from 4194000 up to pid_max, then from the bottom up to 310
    expect([4193999, 4194001, 300, 310, 311].map((pid) => handedOut(pid, 4194000, 310))).toEqual([
      false,
      true,
      true,
      true,
      false,
    ]);
    // nothing handed out
    expect(handedOut(100, 100, 100)).toBe(false);
  });
});
