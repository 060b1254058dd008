/**
 * The one base of kreplay's errors: every failure that crosses a module
 * boundary carries a stable string `code` that callers (and HTTP clients,
 * through problem+json) can switch on, whatever its message says.
 */
export class KreplayError extends Error {
  constructor(
    readonly code: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}
