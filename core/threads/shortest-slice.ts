/**
 * A latency-bound thread without real-time priority asks the fair scheduler
 * for its shortest slice (EEVDF custom slices, Linux 6.12+; no privilege, its
 * nice value kept). A thread with a shorter slice gets an earlier virtual
 * deadline, so when it wakes beside busy neighbours it runs at once instead
 * of waiting out their slices. Only for threads that run briefly each time
 * they wake: one that runs longer than the slice is preempted more often, so
 * the threads a thread starts afterwards (a query worker) do not inherit it.
 */
import type { Logger } from '../log/logger';
import { nativeAddon } from '../native/addon';

/**
 * Asks for thread `tid`'s shortest slice; `thread` names it in the log. The
 * scheduling it got for a log line (`slice 0.1 ms`), or null where the
 * kernel keeps its default (said once at debug level: nothing changes).
 */
export function askShortestSlice(tid: number, thread: string, log: Logger): string | null {
  try {
    const addon = nativeAddon();
    if (addon.setShortestSlice(tid)) return `slice ${addon.shortestSliceNs / 1e6} ms`;
    log.debug(`${thread} keeps its scheduling: custom slices need Linux 6.12+ and SCHED_OTHER`, {
      thread: tid,
    });
  } catch (err) {
    log.debug(`${thread} keeps the default slice`, { thread: tid, error: (err as Error).message });
  }
  return null;
}
