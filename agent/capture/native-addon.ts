/** The compiled addon (native/), loaded once, with the types of what it exports. */
import fs from 'node:fs';
import path from 'node:path';
import { CaptureError } from './capture-error';

/** What startCapture hands the addon: every field present and already validated. */
export interface NativeCaptureConfig {
  ringBufferBytes: number;
  wakeupBytes: number;
  pollTimeoutMs: number;
  selfTgid: number;
  pids: number[];
  cgroupId: bigint;
  comm: string;
  minDurationNs: number;
  attribution: boolean;
}

export interface NativeCaptureSession {
  attachPoints(): string[];
  /** enum kr_counter order, summed over CPUs */
  readCounters(): number[];
  /** highest fill seen by the poll thread before draining, since the last call (0..1, -1 unknown) */
  ringFill(): number;
  /** Asks the poll thread to drain and finish; onClosed follows. */
  stop(): void;
}

export interface NativeAddon {
  CaptureSession: new (
    config: NativeCaptureConfig,
    onBatch: (batch: Buffer) => void,
    onClosed: (error: Error | undefined) => void,
  ) => NativeCaptureSession;
  clockOffset(): { offsetNs: bigint; errorNs: number };
  ensureTracefs(): boolean;
  /** [level, text] lines from libbpf and the addon since the last call */
  drainLog(): [string, string][];
  /** SCHED_FIFO at `priority` for thread `tid` of this process; throws E_SCHED_PERM or E_SCHED */
  setRealtimeScheduling(tid: number, priority: number): void;
  /** a non-blocking pipe [readFd, writeFd]; throws E_PIPE */
  doorbellPipe(): [number, number];
}

const ADDON_PATH = path.join('native', 'build', 'Release', 'kreplay_native.node');

/** The repository root: the sources run from agent/ under ts-jest and from dist/agent/ after tsc. */
function repoRoot(): string {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'native'))) return dir;
    if (path.dirname(dir) === dir)
      throw new CaptureError('E_CAPTURE_NATIVE', `no kreplay checkout above ${__dirname}`);
  }
}

let addon: NativeAddon | undefined;

export function nativeAddon(): NativeAddon {
  if (!addon) {
    const file = path.join(repoRoot(), ADDON_PATH);
    if (!fs.existsSync(file)) {
      throw new CaptureError('E_CAPTURE_NATIVE', `the native addon ${file} is not built: run \`make build\``);
    }
    const loaded = { exports: {} as NativeAddon };
    process.dlopen(loaded, file);
    addon = loaded.exports;
  }
  return addon;
}
