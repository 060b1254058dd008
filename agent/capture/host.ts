/** Facts about the host the capture depends on: its clocks and tracefs. */
import type { Logger } from '../../core/log/logger';
import { toCaptureError } from './capture-error';
import { nativeAddon } from '../../core/native/addon';

/**
 * CLOCK_REALTIME - CLOCK_BOOTTIME: add it to a record's boot-clock
 * timestamp to get wall-clock nanoseconds, exact to within errorNs.
 */
export function clockOffset(): { offsetNs: bigint; errorNs: number } {
  return nativeAddon().clockOffset();
}

/** Mounts tracefs at /sys/kernel/tracing when its events are not visible. */
export function ensureTracefs(log: Logger): void {
  let mounted: boolean;
  try {
    mounted = nativeAddon().ensureTracefs();
  } catch (err) {
    throw toCaptureError(err);
  }
  if (mounted) log.info('mounted tracefs at /sys/kernel/tracing');
}
