/**
 * The one base of kreplay's errors: every failure that crosses a module
 * boundary carries a stable string `code` that callers (and HTTP clients,
 * through problem+json) can switch on, whatever its message says. Every
 * code is registered, with its meaning, in core/error-codes.ts.
 */
import type { ErrorCode } from './error-codes';

export class KreplayError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}
