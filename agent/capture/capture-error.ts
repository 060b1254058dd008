/**
 * Why a capture could not start or stopped. `code` is stable for callers:
 * E_CAPTURE_CONFIG, E_CAPTURE_PERM, E_CAPTURE_NO_BTF,
 * E_CAPTURE_NO_TRACEPOINT, E_CAPTURE_LOAD, E_CAPTURE_ATTACH,
 * E_CAPTURE_RINGBUF, E_CAPTURE_STATE.
 */
import { isErrorCode } from '../../core/error-codes';
import { KreplayError } from '../../core/errors';
export class CaptureError extends KreplayError {}

/** The addon throws Errors with a string `code`; anything else is a bug and passes through. */
export function toCaptureError(err: unknown): unknown {
  if (err instanceof CaptureError) return err;
  if (err instanceof Error) {
    const code = (err as Error & { code?: unknown }).code;
    if (isErrorCode(code) && code.startsWith('E_CAPTURE_')) return new CaptureError(code, err.message);
  }
  return err;
}
