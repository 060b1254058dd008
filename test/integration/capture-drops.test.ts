/**
 * Under a write storm into a tiny ring buffer the kernel drops records, and
 * counts every one: records delivered + drops = writes made, exactly.
 */
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { buildStormWriter, STORM_FD } from '../support/storm-writer';
import { useTempDir } from '../support/temp-dir';
import { captureAround, describeKernel } from './capture-harness';

const dir = useTempDir();
const M = 200_000;

describeKernel('drop accounting', () => {
  it('counts every record the full ring could not take', async () => {
    const storm = buildStormWriter(dir.path);
    const devNull = openSync('/dev/null', 'w');
    const child = spawn(storm, [String(M)], { stdio: ['pipe', 'ignore', 'inherit', devNull] });
    closeSync(devNull);
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));

    const {
      records,
      counters,
      value: exitCode,
    } = await captureAround(
      // filterTransactions: other processes' transaction writes (kept by default) would count too
      {
        include: [{ pid: child.pid as number }],
        filterTransactions: true,
        ringBufferBytes: 4096,
        wakeupBytes: 512,
      },
      async (capture) => {
        child.stdin?.end('g');
        const code = await exited;
        const fill = capture.ringFill();
        expect(fill).toBeGreaterThanOrEqual(0);
        expect(fill).toBeLessThanOrEqual(1);
        return code;
      },
    );
    expect(exitCode).toBe(0);

    const stormRecords = records.filter((r) => r.type === 'sys_write' && r.pid === child.pid);
    expect(stormRecords.every((r) => r.type === 'sys_write' && r.fd === STORM_FD && r.count === 1)).toBe(
      true,
    );
    expect(counters.sysWriteDropped).toBeGreaterThan(0);
    expect(stormRecords.length + counters.sysWriteDropped).toBe(M);
    expect(counters.sysWriteEmitted).toBe(stormRecords.length);
  });
});
