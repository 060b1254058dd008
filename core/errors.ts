/**
 * The one base of kreplay's own errors: every failure a caller may act on
 * carries a stable string `code` (E_…), so callers branch on the code, never
 * on the message text.
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

/** The `code` of an error from kreplay or from the native addon (which sets one on plain Errors). */
export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
