/**
 * block_io capture on a loop device: over a quiet window, one record per
 * request the kernel itself counts as completed in /sys/block/loopN/stat,
 * and O_DIRECT writes attributed to the context of the process doing them.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { clockOffset } from '../../agent/capture';
import type { DecodedBlockIo, DecodedContext } from '../support/decode-records';
import { captureAround, describeKernel, runToExit } from './capture-harness';
import { waitFor } from '../support/wait';

const DIRECT_WRITES = 64;
const BLOCK = 4096;
const OP_WRITE = 1;
// /sys/block/<dev>/stat: reads, writes, discards and flushes completed
const COMPLETED_FIELDS = [0, 4, 11, 15];

interface LoopDevice {
  device: string;
  mountPoint: string;
  major: number;
  minor: number;
}

function sysBlock(device: string, file: string): string {
  return readFileSync(`/sys/block/${basename(device)}/${file}`, 'utf8').trim();
}

function completedIos(device: string): number {
  const fields = sysBlock(device, 'stat').split(/\s+/).map(Number);
  return COMPLETED_FIELDS.reduce((sum, i) => sum + (fields[i] ?? 0), 0);
}

/** Waits until nothing is in flight and the counts held still over 300 ms. */
async function settle(device: string): Promise<void> {
  let last = -1;
  await waitFor(
    () => {
      const now = completedIos(device);
      const still =
        now === last &&
        sysBlock(device, 'inflight')
          .split(/\s+/)
          .every((n) => n === '0');
      last = now;
      return still;
    },
    { everyMs: 300, timeoutMs: 30_000, what: `${device} to settle` },
  );
}

function bootNowNs(offsetNs: bigint): bigint {
  return BigInt(Date.now()) * 1_000_000n - offsetNs;
}

describeKernel('block_io capture', () => {
  let loop: LoopDevice | undefined;
  // undone in reverse order, whatever step setup got to
  const cleanups: (() => void)[] = [];

  beforeAll(() => {
    const imageDir = mkdtempSync('/dev/shm/kreplay-');
    cleanups.push(() => rmSync(imageDir, { recursive: true, force: true }));
    const image = join(imageDir, 'disk.img');
    execFileSync('truncate', ['-s', '64M', image]);
    const device = execFileSync('losetup', ['-f', '--show', image], { encoding: 'utf8' }).trim();
    cleanups.push(() => execFileSync('losetup', ['-d', device]));
    const mountPoint = mkdtempSync(join(tmpdir(), 'kreplay-mnt-'));
    cleanups.push(() => rmSync(mountPoint, { recursive: true, force: true }));
    // no lazy init: its background writes would break the quiet window
    execFileSync('mkfs.ext4', ['-q', '-E', 'lazy_itable_init=0,lazy_journal_init=0', device]);
    execFileSync('mount', [device, mountPoint]);
    cleanups.push(() => execFileSync('umount', [mountPoint]));
    const [major, minor] = sysBlock(device, 'dev').split(':').map(Number);
    loop = { device, mountPoint, major: major as number, minor: minor as number };
  });

  afterAll(() => {
    for (const cleanup of cleanups.reverse()) {
      try {
        cleanup();
      } catch (err) {
        console.warn(`block test cleanup: ${String(err)}`);
      }
    }
  });

  it('emits one record per completed request, attributed to its submitter', async () => {
    const { device, mountPoint, major, minor } = loop!;
    expect(sysBlock(device, 'queue/iostats')).toBe('1');
    const { offsetNs } = clockOffset();
    const file = join(mountPoint, 'direct');
    const { records, value } = await captureAround({}, async () => {
      await settle(device);
      const before = { ios: completedIos(device), at: bootNowNs(offsetNs) };
      const ddPid = await runToExit('sh', [
        '-c',
        `printf "KREPLAY-CTX txn=blk\\n" > /dev/null; ` +
          `exec dd if=/dev/zero of=${file} bs=${BLOCK} count=${DIRECT_WRITES} oflag=direct conv=fsync status=none`,
      ]);
      await settle(device);
      const after = { ios: completedIos(device), at: bootNowNs(offsetNs) };
      return { before, after, ddPid };
    });
    const { before, after, ddPid } = value;

    const onLoop = records.filter(
      (r): r is DecodedBlockIo =>
        r.type === 'block_io' &&
        r.devMajor === major &&
        r.devMinor === minor &&
        r.startNs + r.durationNs > before.at &&
        r.startNs + r.durationNs <= after.at,
    );
    expect(onLoop.length).toBe(after.ios - before.ios);

    const marker = records.find((r): r is DecodedContext => r.type === 'context' && r.pid === ddPid);
    expect(marker?.data.toString()).toBe('KREPLAY-CTX txn=blk\n');
    const direct = onLoop.filter((r) => r.pid === ddPid && r.op === OP_WRITE && r.bytes > 0);
    expect(direct.reduce((sum, r) => sum + r.bytes, 0)).toBe(DIRECT_WRITES * BLOCK);
    for (const r of direct) {
      expect(r).toMatchObject({ comm: 'dd', status: 0, contextId: marker?.contextId });
      expect(r.bytes % BLOCK).toBe(0);
      expect(r.durationNs).toBeGreaterThan(0n);
    }
    for (const r of onLoop) expect(r.status).toBe(0);
  });
});
