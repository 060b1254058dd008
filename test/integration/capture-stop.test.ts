/**
 * A capture's stop against the real kernel: the records made before stop() are all delivered, and
 * `drained` says so before the probes detach (their detaching takes the kernel seconds on a loaded
 * host, and the agent commits meanwhile); stop() resolves once they are detached.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { startCapture } from '../../agent/capture';
import { decodeRecords, type DecodedSysWrite } from '../support/decode-records';
import { useTempDir } from '../support/temp-dir';
import { describeKernel } from './capture-harness';

const dir = useTempDir();
const WRITES = 64;

describeKernel('capture stop', () => {
  it('delivers every write made before stop(), says drained long before the probes are detached', async () => {
    const order: string[] = [];
    const batches: Buffer[] = [];
    const capture = startCapture(
      { excludeSelf: false, include: [{ pid: process.pid }], filterTransactions: true },
      (batch) => {
        order.push('batch');
        batches.push(Buffer.from(batch));
      },
      silentLogger,
    );
    const fd = openSync(join(dir.path, 'out'), 'w');
    for (let i = 0; i < WRITES; i++) writeSync(fd, 'x');
    closeSync(fd);

    const began = performance.now();
    const stopped = capture.stop().then(() => order.push('detached'));
    await capture.drained;
    order.push('drained');
    const drainedMs = performance.now() - began;
    await stopped;
    const detachedMs = performance.now() - began;

    // nothing is delivered once drained is said
    expect(order.slice(order.indexOf('drained'))).toEqual(['drained', 'detached']);
    const writes = batches
      .flatMap(decodeRecords)
      .filter((r): r is DecodedSysWrite => r.type === 'sys_write' && r.fd === fd && r.pid === process.pid);
    expect(writes).toHaveLength(WRITES);
    // the kernel detaches a probe at a time, each after a grace period: drained comes first, not
    // after them (the agent's store commits in between)
    expect(capture.attachPoints.length).toBeGreaterThan(10);
    expect(drainedMs).toBeLessThan(detachedMs / 2);
  });
});
