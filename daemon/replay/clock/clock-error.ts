/**
 * What the replay clock could not get from the system: E_SCHED and
 * E_SCHED_PERM (real-time scheduling), E_PIPE (its doorbell), E_DUP (its copy
 * of a stream's socket), E_CLOCK_STALLED (its thread did not answer). Not capture errors.
 */
import { KreplayError } from '../../../core/errors';

const CODES = ['E_SCHED', 'E_SCHED_PERM', 'E_PIPE', 'E_DUP', 'E_CLOCK_STALLED'] as const;
export type ClockErrorCode = (typeof CODES)[number];

export class ClockError extends KreplayError {
  declare readonly code: ClockErrorCode;
}

/** Runs a native call of the clock's, giving what it throws the clock's class. */
export function asClockError<T>(fallback: ClockErrorCode, call: () => T): T {
  try {
    return call();
  } catch (err) {
    const { code, message } = err as { code?: unknown; message?: unknown };
    const known = CODES.find((c) => c === code);
    throw new ClockError(known ?? fallback, String(message ?? err));
  }
}
