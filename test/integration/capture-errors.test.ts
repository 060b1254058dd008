/** startCapture refuses bad options and missing privileges with a CaptureError and its code. */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { createLogger, silentLogger } from '../../core/log/logger';
import { CaptureError, startCapture, type CaptureOptions } from '../../agent/capture';
import { describeKernel } from './capture-harness';

function startError(options: CaptureOptions): unknown {
  try {
    startCapture(options, () => undefined, silentLogger);
  } catch (err) {
    return err;
  }
  throw new Error('startCapture accepted the options');
}

describe('capture options', () => {
  it.each<[string, CaptureOptions]>([
    ['1025 pids', { include: Array.from({ length: 1025 }, (_, i) => ({ pid: 1000 + i })) }],
    ['a ring that is no power of two', { ringBufferBytes: 5000 }],
    ['a ring below one page', { ringBufferBytes: 1024 }],
    ['a comm longer than 15 bytes', { exclude: [{ comm: 'a-very-long-command' }] }],
    ['cgroup id 0', { include: [{ cgroupId: 0n }] }],
    ['a sampling rate of 0', { sampleBackground: 0 }],
    ['a zero poll timeout', { pollTimeoutMs: 0 }],
    ['a negative minimum duration', { minDurationNs: -1 }],
    ['pid 0', { include: [{ pid: 0 }] }],
  ])('rejects %s with E_CAPTURE_CONFIG', (_, options) => {
    const err = startError(options);
    expect(err).toBeInstanceOf(CaptureError);
    expect(err).toMatchObject({ code: 'E_CAPTURE_CONFIG' });
  });
});

describeKernel('capture privileges', () => {
  it('reports E_CAPTURE_PERM with advice when not privileged', () => {
    const addon = join(__dirname, '../../native/build/Release/kreplay_native.node');
    const script = `
      const { CaptureSession } = require(${JSON.stringify(addon)});
      const none = { pids: [], comms: [], cgroupIds: [] };
      const config = { ringBufferBytes: 65536, wakeupBytes: 4096, pollTimeoutMs: 100, selfTgid: 0,
        filter: { include: none, exclude: none, includes: false, cgroupFilter: false, transactions: false },
        sampleBackground: 1, minDurationNs: 0, attribution: true, targets: true, captureReads: false };
      try { new CaptureSession(config, () => {}, () => {}); } catch (e) { console.log(JSON.stringify([e.code, e.message])); }`;
    const out = execFileSync(
      'setpriv',
      ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', script],
      {
        encoding: 'utf8',
      },
    );
    const [code, message] = JSON.parse(out) as [string, string];
    expect(code).toBe('E_CAPTURE_PERM');
    expect(message).toMatch(/run kreplay as root/);
  });
});

describeKernel('capture load', () => {
  it('loads and attaches without a libbpf warning (each would be printed at every agent start)', async () => {
    const warnings: string[] = [];
    const log = createLogger({ level: 'warn', format: 'text', write: (line) => warnings.push(line) });
    const capture = startCapture({}, () => undefined, log);
    await capture.stop();
    expect(warnings).toEqual([]);
  });
});
