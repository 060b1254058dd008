/**
 * The wall clock set while the agent runs: events read after the set are stamped by the clock as
 * set, at once, not after the next periodic resync (a minute). The machine's clock is stepped
 * forward by STEP_NS alone (never back), which no other test can mind.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { RecordType } from '../../core/model';
import { startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { readStoredEvents } from '../support/store-rows';
import { waitFor } from '../support/wait';

const STEP_NS = 20_000_000n;
// what the set's own read-then-set and the offset's measurement may take off the step
const SLACK_NS = 200_000n;

// Two writes to /dev/null of distinct sizes, each bracketed by CLOCK_BOOTTIME reads (the records'
// own clock), the second once the test says so.
const WRITER = `
import os, sys, time
fd = os.open('/dev/null', os.O_WRONLY)
def write(size):
    before = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    os.write(fd, b'x' * size)
    after = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    print(before, after, flush=True)
write(37)
sys.stdin.readline()
write(41)
`;

let dir: string;
let cgroup: TestCgroup;
let agent: AgentProcess | undefined;
let writer: ChildProcessWithoutNullStreams | undefined;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-clock-'));
  cgroup = createCgroup(`kreplay-clock-${process.pid}`);
});

afterAll(async () => {
  writer?.kill('SIGKILL');
  await agent?.stop('SIGTERM');
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
});

describe('the wall clock set under a running agent (real kernel)', () => {
  it('stamps the events read after the set by the clock as set, at once', async () => {
    const store = join(dir, 'data', 'clock.db');
    agent = await startAgent([
      '--data-dir',
      join(dir, 'data'),
      '--node',
      'clock',
      '--cgroup-id',
      String(cgroup.id),
    ]);
    writer = spawn('/bin/sh', ['-c', `${cgroup.enter} /usr/bin/python3 -c "$0"`, WRITER]);
    const lines = createInterface({ input: writer.stdout })[Symbol.asyncIterator]();
    const bracket = async (): Promise<[bigint, bigint]> => {
      const line = (await lines.next()).value as string;
      const [before, after] = line.split(' ').map(BigInt);
      return [before!, after!];
    };
    const written = (bytes: number) =>
      waitFor(
        () =>
          readStoredEvents(
            store,
            `e.type = ${RecordType.SysWrite} AND e.bytes = ${bytes} AND e.pid = ${writer!.pid}`,
          )[0],
      );

    const [aBefore, aAfter] = await bracket();
    // read and stamped before the set
    const a = await written(37);
    const set = spawnSync('/usr/bin/python3', [
      '-c',
      `import time; time.clock_settime_ns(time.CLOCK_REALTIME, time.clock_gettime_ns(time.CLOCK_REALTIME) + ${STEP_NS})`,
    ]);
    expect(set.stderr.toString()).toBe('');
    await waitFor(() => (/the wall clock was set/.test(agent!.output()) ? true : undefined));
    writer.stdin.write('\n');
    const [bBefore, bAfter] = await bracket();
    const b = await written(41);

    // the stamps' distance is the boot clock's plus the step, within what the writes took
    const apart = b.ts - a.ts;
    expect(apart).toBeGreaterThanOrEqual(bBefore - aAfter + STEP_NS - SLACK_NS);
    expect(apart).toBeLessThanOrEqual(bAfter - aBefore + STEP_NS);
  });
});
