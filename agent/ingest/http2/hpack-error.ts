import { KreplayError } from '../../../core/errors';

/** A header block kreplay cannot decode: the connection's table is lost from here on. */
export class HpackError extends KreplayError {
  constructor(message: string) {
    super('E_HPACK', message);
  }
}
