/** Thread scheduling and the lock-free doorbell pipe, as coded errors of their own (not capture errors). */
import { errorCode, KreplayError } from '../errors';
import { nativeAddon } from './addon';

/** A thread could not be scheduled as asked: E_SCHED_PERM without CAP_SYS_NICE, else E_SCHED. */
export class SchedulingError extends KreplayError {}

/** No pipe could be made: E_PIPE. */
export class PipeError extends KreplayError {}

/** Puts thread `tid` of this process under SCHED_FIFO at `priority`. */
export function setRealtimeScheduling(tid: number, priority: number): void {
  try {
    nativeAddon().setRealtimeScheduling(tid, priority);
  } catch (err) {
    throw new SchedulingError(errorCode(err) ?? 'E_SCHED', (err as Error).message, { cause: err });
  }
}

/** A non-blocking, close-on-exec pipe: [readFd, writeFd]. */
export function doorbellPipe(): [number, number] {
  try {
    return nativeAddon().doorbellPipe();
  } catch (err) {
    throw new PipeError(errorCode(err) ?? 'E_PIPE', (err as Error).message, { cause: err });
  }
}
