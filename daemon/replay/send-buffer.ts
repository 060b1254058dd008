/**
 * What one event stream may hold unsent, whoever writes it (the main thread
 * through Node's socket, or the clock thread straight to its descriptor). A
 * watcher that does not read is cut off rather than buffered without bound;
 * it reconnects with Last-Event-ID and catches up from the store, at its own
 * pace. Past `softBytes` waiting it is cut if it took nothing in `stallMs`
 * (a dense burst outruns any reader for a moment, a reader that keeps reading
 * is not cut); past `hardBytes` it is cut at once. With --max-streams this
 * bounds what the streams hold.
 */
export const SEND_BUFFER = {
  softBytes: 256 << 10,
  hardBytes: 8 << 20,
  stallMs: 2000,
} as const;

export type SendBufferLimits = typeof SEND_BUFFER;
