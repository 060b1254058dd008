/** Which threads of a process run behind its event path: V8's platform threads, by the names Node gives them. */
import { readdirSync, readFileSync } from 'node:fs';
import { backgroundThreads } from '../../core/threads/background-threads';

describe('backgroundThreads', () => {
  it("picks V8's workers and its delayed-task thread, as /proc names them, and no other thread", () => {
    const threads = [
      'MainThread',
      'DelayedTaskSche',
      'V8Worker',
      'V8Worker',
      'SignalInspector',
      'libuv-worker',
      'WorkerThread',
      'query-worker',
      'replay-clock',
      'V8WorkerX',
      'v8worker',
    ].map((name, i) => ({ tid: 100 + i, comm: `${name}\n` }));
    expect(backgroundThreads(threads)).toEqual([101, 102, 103]);
  });

  it('finds the platform threads of the Node that runs it (a Node that renamed them would lower none)', () => {
    const own = readdirSync('/proc/self/task').map((tid) => ({
      tid: Number(tid),
      comm: readFileSync(`/proc/self/task/${tid}/comm`, 'utf8'),
    }));
    const picked = backgroundThreads(own);
    const names = (tids: number[]) => own.filter((t) => tids.includes(t.tid)).map((t) => t.comm.trim());
    expect(names(picked)).toContain('V8Worker');
    expect(names(picked)).toContain('DelayedTaskSche');
    expect(names([process.pid])).toEqual(['MainThread']);
    expect(picked).not.toContain(process.pid);
  });
});
