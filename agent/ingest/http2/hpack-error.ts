/** A header block kreplay cannot decode: the connection's table is lost from here on. */
export class HpackError extends Error {
  readonly code = 'E_HPACK';
}
