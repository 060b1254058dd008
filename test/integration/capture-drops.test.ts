/**
 * Under a write storm into a tiny ring buffer the kernel drops records, and
 * counts every one: records delivered + drops = writes made, exactly.
 */
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { useTempDir } from '../support/temp-dir';
import { captureAround, describeKernel } from './capture-harness';

const dir = useTempDir();
const M = 200_000;
const STORM_FD = 3;

// Waits for a byte on stdin (the capture is attached by then), then writes
// one byte to fd 3 M times and nothing else.
const STORM_C = `
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
  long m = atol(argv[1]);
  char go;
  if (read(0, &go, 1) != 1) return 2;
  for (long i = 0; i < m; i++)
    if (write(${STORM_FD}, "x", 1) != 1) return 1;
  return 0;
}
`;

describeKernel('drop accounting', () => {
  it('counts every record the full ring could not take', async () => {
    writeFileSync(join(dir.path, 'storm.c'), STORM_C);
    const storm = join(dir.path, 'storm');
    execFileSync('cc', ['-O2', '-o', storm, join(dir.path, 'storm.c')]);
    const devNull = openSync('/dev/null', 'w');
    const child = spawn(storm, [String(M)], { stdio: ['pipe', 'ignore', 'inherit', devNull] });
    closeSync(devNull);
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));

    const {
      records,
      counters,
      value: exitCode,
    } = await captureAround(
      { pids: [child.pid as number], ringBufferBytes: 4096, wakeupBytes: 512 },
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
