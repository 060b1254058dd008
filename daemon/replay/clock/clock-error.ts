/**
 * What the replay clock could not get from the system: E_SCHED and
 * E_SCHED_PERM (real-time scheduling), E_PIPE (its doorbell). Not capture errors.
 */
import { KreplayError } from '../../../core/errors';

export type ClockErrorCode = 'E_SCHED' | 'E_SCHED_PERM' | 'E_PIPE';

export class ClockError extends KreplayError {
  declare readonly code: ClockErrorCode;
}

/** Runs a native call of the clock's, giving what it throws the clock's class. */
export function asClockError<T>(fallback: ClockErrorCode, call: () => T): T {
  try {
    return call();
  } catch (err) {
    const { code, message } = err as { code?: unknown; message?: unknown };
    const known = code === 'E_SCHED' || code === 'E_SCHED_PERM' || code === 'E_PIPE';
    throw new ClockError(known ? code : fallback, String(message ?? err));
  }
}
