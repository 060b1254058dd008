/** sys_write capture against the real kernel: every write of this thread, exactly once, with exact fields. */
import { closeSync, openSync, readFileSync, writeFileSync, writeSync, writevSync } from 'node:fs';
import { join } from 'node:path';
import { clockOffset } from '../../agent/capture';
import type { DecodedSysWrite } from '../support/decode-records';
import { useTempDir } from '../support/temp-dir';
import { captureAround, describeKernel } from './capture-harness';

const dir = useTempDir();
const N = 200;
const NOT_AN_FD = 987_654;
const EBADF = 9;
const SYS = { write: 1, writev: 2, pwrite64: 3 };

function wallClockNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

describeKernel('sys_write capture', () => {
  it('records each write, writev and pwrite of this thread once, with exact fields', async () => {
    const fd = openSync(join(dir.path, 'out'), 'w');
    const sizes = Array.from({ length: N }, (_, i) => 1 + i * 13);
    const { records, value: window } = await captureAround(
      // filterTransactions: other processes' writes in a transaction would be kept too
      { excludeSelf: false, include: [{ pid: process.pid }], filterTransactions: true },
      () => {
        const before = wallClockNs();
        for (const size of sizes) writeSync(fd, Buffer.alloc(size, 0x61));
        writevSync(fd, [Buffer.alloc(100, 0x62), Buffer.alloc(23, 0x63)]);
        writeSync(fd, Buffer.alloc(77, 0x64), 0, 77, 5);
        const after = wallClockNs() + 1_000_000n;
        return { before, after };
      },
    );
    closeSync(fd);

    const mine = records.filter((r): r is DecodedSysWrite => r.type === 'sys_write' && r.fd === fd);
    mine.sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
    expect(mine).toHaveLength(N + 2);
    expect(mine.map((r) => r.count)).toEqual([...sizes, 123, 77]);
    expect(mine.map((r) => r.syscall)).toEqual([...sizes.map(() => SYS.write), SYS.writev, SYS.pwrite64]);

    const comm = readFileSync('/proc/self/comm', 'utf8').trim();
    const { offsetNs, errorNs } = clockOffset();
    const slack = BigInt(Math.ceil(errorNs));
    for (const r of mine) {
      expect(r.ret).toBe(r.count);
      expect([r.pid, r.tid]).toEqual([process.pid, process.pid]);
      expect(r.comm).toBe(comm);
      expect(r.durationNs).toBeGreaterThan(0n);
      const wall = r.startNs + offsetNs;
      expect(wall).toBeGreaterThanOrEqual(window.before - slack);
      expect(wall).toBeLessThanOrEqual(window.after + slack);
    }
  });

  it('reports the comm the thread has at each write, through renames', async () => {
    const fd = openSync(join(dir.path, 'out'), 'w');
    const original = readFileSync('/proc/self/comm', 'utf8').trim();
    const { records } = await captureAround(
      { excludeSelf: false, include: [{ pid: process.pid }], filterTransactions: true },
      () => {
        writeSync(fd, 'before');
        try {
          writeFileSync('/proc/self/comm', 'kreplay-renamed-thread');
          writeSync(fd, 'after');
        } finally {
          writeFileSync('/proc/self/comm', original);
        }
      },
    );
    closeSync(fd);
    const mine = records.filter((r): r is DecodedSysWrite => r.type === 'sys_write' && r.fd === fd);
    // the kernel keeps 15 bytes of a name
    expect(mine.map((r) => r.comm)).toEqual([original, 'kreplay-renamed']);
  });

  it('keeps failed writes with their negative errno', async () => {
    const { records } = await captureAround(
      { excludeSelf: false, include: [{ pid: process.pid }], filterTransactions: true },
      () => {
        expect(() => writeSync(NOT_AN_FD, 'x')).toThrow(/EBADF/);
      },
    );
    const failed = records.filter((r): r is DecodedSysWrite => r.type === 'sys_write' && r.fd === NOT_AN_FD);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ ret: -EBADF, count: 1, syscall: SYS.write, pid: process.pid });
  });
});
