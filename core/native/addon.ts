/**
 * The compiled addon (native/), loaded once, with the types of what it
 * exports: the kernel capture (agent/capture) and the replay clock's thread
 * scheduling and doorbell (daemon/replay/clock) both bind through here.
 */
import fs from 'node:fs';
import path from 'node:path';
import { KreplayError } from '../errors';
import { repoRoot } from '../paths';

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

export interface NativeAddon {
  CaptureSession: new (
    config: NativeCaptureConfig,
    onBatch: (batch: Buffer) => void,
    onClosed: (error: Error | undefined) => void,
  ) => NativeCaptureSession;
  clockOffset(): { offsetNs: bigint; errorNs: number };
  ensureTracefs(): boolean;
  /** CAP_SYS_ADMIN, or CAP_BPF and CAP_PERFMON: what loading tracing programs needs */
  hasBpfCapabilities(): boolean;
  /** [level, text] lines from libbpf and the addon since the last call */
  drainLog(): [string, string][];
  /** SCHED_FIFO at `priority` for thread `tid` of this process; throws E_SCHED_PERM or E_SCHED */
  setRealtimeScheduling(tid: number, priority: number): void;
  /** a non-blocking pipe [readFd, writeFd]; throws E_PIPE */
  doorbellPipe(): [number, number];
}

/** The addon is missing or would not load: E_NATIVE. */
export class NativeAddonError extends KreplayError {
  constructor(message: string) {
    super('E_NATIVE', message);
  }
}

const ADDON_PATH = path.join('native', 'build', 'Release', 'kreplay_native.node');

let addon: NativeAddon | undefined;

export function nativeAddon(): NativeAddon {
  if (!addon) {
    const file = path.join(repoRoot(), ADDON_PATH);
    if (!fs.existsSync(file)) {
      throw new NativeAddonError(`the native addon ${file} is not built: run \`make build\``);
    }
    const loaded = { exports: {} as NativeAddon };
    process.dlopen(loaded, file);
    addon = loaded.exports;
  }
  return addon;
}
