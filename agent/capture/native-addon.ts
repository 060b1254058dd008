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
  ringFill(): number;
  /** Asks the poll thread to drain and finish; onClosed follows. */
  stop(): void;
}

/** One recorded target of `kreplay replay --exec`: the names it answers to, a hold (or release offset) per call. */
export interface NativeExecTarget {
  keys: string[];
  holdsNs: BigInt64Array;
}

export interface NativeExecResults {
  targets: { matched: number; passed: number; observedNs: BigInt64Array; intendedNs: BigInt64Array }[];
  unmatched: { target: string; kind: string; calls: number }[];
  bypassed: number;
}

export interface NativeExecSupervisor {
  /** timeline pace: playing from `offsetNs`, or paused there */
  setTimeline(playing: boolean, offsetNs: number): void;
  /** releases every held call and lets every later one through */
  bypass(): void;
  /** releases every held call, joins the thread */
  stop(): void;
  /** after stop() */
  results(): NativeExecResults;
}

export interface NativeAddon {
  ExecSupervisor: new (
    listenerFd: number,
    plan: { pace: 'duration' | 'timeline'; targets: NativeExecTarget[] },
    onEnd: (error: (Error & { code: string }) | undefined) => void,
  ) => NativeExecSupervisor;
  /** a close-on-exec unix stream pair [ours, theirs]; throws E_EXEC_HANDOFF */
  execSocketPair(): [number, number];
  /** one message of the launcher and the fd it carries (else -1); throws E_EXEC_HANDOFF */
  receiveMessage(fd: number, timeoutMs: number): { text: string; fd: number };
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
