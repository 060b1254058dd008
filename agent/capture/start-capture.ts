/** A running capture: the kernel programs attached and their records flowing to onBatch. */
import type { Logger } from '../../core/log/logger';
import { KERNEL_COUNTER_COUNT, kernelCounters, type KernelCounterName } from '../../core/model';
import { CaptureError, toCaptureError } from './capture-error';
import { toNativeConfig, type CaptureOptions } from './capture-options';
import {
  nativeAddon,
  type NativeAddon,
  type NativeCaptureSession,
  type ProgramStats,
} from '../../core/native/addon';
import { ensureTracefs } from './host';

export interface Capture {
  /** section names of the attached programs, e.g. 'tp_btf/block_io_start' */
  readonly attachPoints: string[];
  /** kernel counters summed over CPUs; final values once stop() resolved */
  counters(): Record<KernelCounterName, number>;
  /** highest share of the ring holding unread records since the last call, 0..1, or -1 if unknown */
  ringFill(): number;
  /** run time and count per program, counted while stats are on (kernel.bpf_stats_enabled, or a BPF_ENABLE_STATS fd held); empty once stopped */
  programStats(): ProgramStats[];
  /** replaces the cgroup ids of the kernel filter (an id in both lists is excluded); throws CaptureError */
  setCgroupFilter(include: bigint[], exclude: bigint[]): void;
  /** follows the libuv threadpool of process `pid` (its work requests carry their submitter's request) */
  followLibuv(pid: number): void;
  /** marks process `pid` a JVM: the threads it makes from now on inherit no request in the kernel */
  markJvm(pid: number): void;
  /** the processes that started, exec'd or exited since the last call (ProcessDiscovery's `changes`) */
  processChanges(): number[] | null | undefined;
  /**
   * Resolves once the records up to stop() are all delivered to onBatch, before the probes detach:
   * what they record after that is not read.
   */
  readonly drained: Promise<void>;
  /** resolves after the final batch was delivered to onBatch and the probes detached */
  stop(): Promise<void>;
}

const NATIVE_LOG_EVERY_MS = 1000;

function forwardNativeLog(addon: NativeAddon, log: Logger): void {
  for (const [level, text] of addon.drainLog()) {
    if (level === 'warn') log.warn(text);
    else log.info(text);
  }
}

/**
 * Loads and attaches the kernel side. onBatch receives the records exactly
 * as the kernel wrote them, many per Buffer (see core/model/record-layout).
 * The Buffer is valid during the call only (its memory is freed right
 * after): copy what must outlive it. Throws CaptureError.
 */
export function startCapture(
  options: CaptureOptions,
  onBatch: (batch: Buffer) => void,
  log: Logger,
): Capture {
  const config = toNativeConfig(options);
  ensureTracefs(log);
  const addon = nativeAddon();

  let stopRequested = false;
  let closeError: unknown;
  let markClosed = (): void => undefined;
  const closed = new Promise<void>((resolve) => (markClosed = resolve));
  let markDrained = (): void => undefined;
  const drained = new Promise<void>((resolve) => (markDrained = resolve));

  const deliver = (batch: Buffer | null): void => {
    forwardNativeLog(addon, log);
    if (batch === null) {
      markDrained();
      return;
    }
    try {
      onBatch(batch);
    } catch (err) {
      log.error('capture batch handler failed, batch lost', { bytes: batch.length, error: String(err) });
    }
  };
  // what the probe scans say (a Go binary followed, a stripped one not) is said while no event flows too
  const logTimer = setInterval(() => forwardNativeLog(addon, log), NATIVE_LOG_EVERY_MS);
  logTimer.unref();
  const onClosed = (error: Error | undefined): void => {
    clearInterval(logTimer);
    forwardNativeLog(addon, log);
    if (error) {
      closeError = toCaptureError(error);
      log.error('capture stopped', { error: error.message });
    }
    // a session closed by the environment going away says nothing else
    markDrained();
    markClosed();
  };

  let session: NativeCaptureSession;
  try {
    session = new addon.CaptureSession(config, deliver, onClosed);
  } catch (err) {
    clearInterval(logTimer);
    throw toCaptureError(err);
  } finally {
    forwardNativeLog(addon, log);
  }
  const attachPoints = session.attachPoints();
  log.info('capture attached', { attachPoints: attachPoints.join(',') });

  return {
    attachPoints,
    drained,
    counters() {
      const values = session.readCounters();
      if (values.length !== KERNEL_COUNTER_COUNT) {
        throw new CaptureError(
          'E_CAPTURE_STATE',
          `the native addon reports ${values.length} counters, not ${KERNEL_COUNTER_COUNT}: rebuild it (make build)`,
        );
      }
      return kernelCounters(values);
    },
    ringFill: () => session.ringFill(),
    programStats: () => session.programStats(),
    setCgroupFilter(include, exclude) {
      try {
        session.setCgroupFilter(include, exclude);
      } catch (err) {
        throw toCaptureError(err);
      }
    },
    followLibuv(pid) {
      session.followLibuv(pid);
      forwardNativeLog(addon, log);
    },
    markJvm(pid) {
      session.markJvm(pid);
      forwardNativeLog(addon, log);
    },
    processChanges: () => session.processChanges(),
    async stop() {
      if (!stopRequested) {
        stopRequested = true;
        session.stop();
      }
      await closed;
      if (closeError) throw closeError;
    },
  };
}
