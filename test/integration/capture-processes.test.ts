/**
 * The kernel's news of processes (bpf/capture/tasks.h's proc_events) against the real kernel: the
 * runtime hooks' discovery looks at what it names instead of walking /proc, so a process that
 * starts, execs or exits is named at the next take after it, once, and a thread a process makes is
 * not named (agent/runtimes/discovery/process-discovery.ts's `changes`).
 */
import { spawn } from 'node:child_process';
import { readlinkSync, realpathSync } from 'node:fs';
import { silentLogger } from '../../core/log/logger';
import { startCapture, type Capture } from '../../agent/capture';
import { waitFor } from '../support/wait';
import { describeKernel } from './capture-harness';

/** What the news names from now until `until` holds, take by take. */
async function takesUntil(capture: Capture, until: () => boolean): Promise<number[][]> {
  const takes: number[][] = [];
  await waitFor(() => {
    const held = until();
    const news = capture.processChanges();
    if (!Array.isArray(news)) throw new Error(`no news of processes: ${String(news)}`);
    takes.push(news);
    return held;
  });
  return takes;
}

describeKernel('the news of processes', () => {
  it('names a process at its start, its exec and its exit, once each, and none of its threads', async () => {
    const capture = startCapture(
      { excludeSelf: false, include: [{ pid: process.pid }] },
      () => undefined,
      silentLogger,
    );
    try {
      // what came before this test
      await takesUntil(capture, () => true);
      const child = spawn(
        '/bin/sh',
        [
          '-c',
          'read line; exec /usr/bin/python3 -c "' +
            'import sys, threading\n' +
            'ts = [threading.Thread(target=sys.stdin.readline) for _ in range(3)]\n' +
            '[t.start() for t in ts]\n' +
            'print(*(t.native_id for t in ts), flush=True)\n' +
            '[t.join() for t in ts]"',
        ],
        { stdio: ['pipe', 'pipe', 'ignore'] },
      );
      const pid = child.pid!;
      const exited = new Promise((resolve) => child.on('exit', resolve));
      let out = '';
      child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
      // spawn returns once it has exec'd: its fork and its exec are both in the ring by now
      const started = await takesUntil(
        capture,
        () => readlinkSync(`/proc/${pid}/exe`) === realpathSync('/bin/sh'),
      );
      const named = (takes: number[][]) => takes.filter((take) => take.includes(pid)).length;
      expect(named(started)).toBe(1);
      // nothing new of it: named in no take
      const idle = await takesUntil(capture, () => true);
      expect(named(idle)).toBe(0);

      child.stdin!.write('go\n');
      await waitFor(() => out.includes('\n'));
      const threads = out.trim().split(' ').map(Number);
      expect(threads).toHaveLength(3);
      const execd = await takesUntil(capture, () => true);
      expect(named(execd)).toBe(1);
      expect(execd.flat().filter((tid) => threads.includes(tid))).toEqual([]);

      child.stdin!.end('a\nb\nc\n');
      await exited;
      const gone = await takesUntil(capture, () => true);
      expect(named(gone)).toBe(1);
      expect(gone.flat().filter((tid) => threads.includes(tid))).toEqual([]);
    } finally {
      await capture.stop();
    }
  });
});
