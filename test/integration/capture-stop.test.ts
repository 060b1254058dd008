/**
 * A capture's stop against the real kernel: the records made before stop() are all delivered, and
 * `drained` says so while the probes are still attached (their detaching takes the kernel seconds on
 * a loaded host, and the agent commits meanwhile); stop() resolves once they are detached.
 */
import { closeSync, openSync, readdirSync, readlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { startCapture } from '../../agent/capture';
import { decodeRecords, type DecodedSysWrite } from '../support/decode-records';
import { useTempDir } from '../support/temp-dir';
import { describeKernel } from './capture-harness';

const dir = useTempDir();
const WRITES = 64;

/** This process's open perf events and BPF links: one or two per attached probe. */
function probeFds(): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (/^anon_inode:(\[perf_event\]|bpf_link)$/.test(readlinkSync(`/proc/self/fd/${fd}`))) n++;
    } catch {
      // closed since the listing
    }
  }
  return n;
}

describeKernel('capture stop', () => {
  it('delivers every write made before stop(), says drained with the probes attached, then detaches them', async () => {
    const before = probeFds();
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
    const attached = probeFds() - before;
    expect(attached).toBeGreaterThanOrEqual(capture.attachPoints.length);

    const fd = openSync(join(dir.path, 'out'), 'w');
    for (let i = 0; i < WRITES; i++) writeSync(fd, 'x');
    closeSync(fd);

    const stopped = capture.stop().then(() => order.push('detached'));
    await capture.drained;
    order.push('drained');
    const atDrained = probeFds() - before;
    await stopped;

    // nothing is delivered once drained is said
    expect(order.slice(order.indexOf('drained'))).toEqual(['drained', 'detached']);
    expect(atDrained).toBeGreaterThan(0);
    expect(probeFds() - before).toBe(0);
    const writes = batches
      .flatMap(decodeRecords)
      .filter((r): r is DecodedSysWrite => r.type === 'sys_write' && r.fd === fd && r.pid === process.pid);
    expect(writes).toHaveLength(WRITES);
  });
});
