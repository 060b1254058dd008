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

/**
 * Calls onSet each time the wall clock is set (an NTP step, `date -s`, a VM restored), so the
 * offset is read again at once rather than at the next periodic resync; null, with a warning,
 * where the kernel gives no such timer. onSet's errors are logged, never thrown into the loop.
 */
export function watchClockSet(log: Logger, onSet: () => void): { close(): void } | null {
  try {
    return new (nativeAddon().ClockSetWatch)(() => {
      try {
        onSet();
      } catch (err) {
        log.error(
          `re-reading the clock offset after the wall clock was set failed: ${(err as Error).message}`,
        );
      }
    });
  } catch (err) {
    log.warn(
      `the wall clock's steps are not watched (${(err as Error).message}): the offset is re-read once a minute`,
    );
    return null;
  }
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
