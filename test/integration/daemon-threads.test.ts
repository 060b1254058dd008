/** `kreplay daemon`'s threads as the kernel schedules them: V8's background threads behind the event path, the clock ahead of it. */
import { spawn } from 'node:child_process';
import { KREPLAY_BIN } from '../support/agent-process';
import { writeStore } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';
import { threadPriorities } from '../support/thread-slices';
import { waitFor } from '../support/wait';

const dir = useTempDir('kreplay-daemon-threads-');
const T0 = 1_795_345_678_000_000_000n;
const SCHED_OTHER = 0;
const SCHED_FIFO = 1;

describe('kreplay daemon threads', () => {
  it("runs V8's workers and its delayed-task thread at nice 19, its clock under SCHED_FIFO 10 and every other thread as started", async () => {
    writeStore(dir.path, 'n1', [{ ts: T0, txn: 'tx1' }]);
    const child = spawn(
      process.execPath,
      [
        KREPLAY_BIN,
        'daemon',
        '--data-dir',
        dir.path,
        '--port',
        '0',
        '--log-format',
        'json',
        '--log-level',
        'debug',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    try {
      let err = '';
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
      const said = () =>
        err
          .split('\n')
          .slice(0, -1)
          .map(
            (line) => JSON.parse(line) as { msg: string; thread?: number; threads?: string; url?: string },
          );
      const listening = await waitFor(() => said().find((line) => line.msg === 'listening'), {
        what: 'the daemon listening',
      });
      // it serves while they stay so: a page asked of its query workers
      expect((await fetch(`${listening.url}/api/events?transaction_id=tx1`)).status).toBe(200);
      const threads = threadPriorities(child.pid!);
      const named = (name: string) => [...threads].filter(([, t]) => t.name === name);
      const workers = named('V8Worker');
      expect(workers.length).toBeGreaterThan(0);
      const background = [...workers, ...named('DelayedTaskSche')];
      for (const [, thread] of background) expect(thread).toMatchObject({ policy: SCHED_OTHER, nice: 19 });
      // said once, naming each
      const lowered = said().filter((line) => line.msg === "V8's background threads run at nice 19");
      expect(lowered).toHaveLength(1);
      expect(lowered[0]!.threads!.split(',').map(Number).sort()).toEqual(
        background.map(([tid]) => tid).sort(),
      );
      // the clock keeps real-time priority (the test runs as root)
      const clock = said().find((line) => line.msg === 'replay clock started')!.thread!;
      expect(threads.get(clock)).toMatchObject({ name: 'replay-clock', policy: SCHED_FIFO, rtPriority: 10 });
      // the main thread, the query workers and the rest keep the weight they started with
      const rest = [...threads].filter(([tid]) => tid !== clock && !background.some(([b]) => b === tid));
      expect(rest.map(([, t]) => t.name)).toEqual(expect.arrayContaining(['MainThread', 'query-worker']));
      for (const [, thread] of rest) expect(thread).toMatchObject({ policy: SCHED_OTHER, nice: 0 });
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  });
});
