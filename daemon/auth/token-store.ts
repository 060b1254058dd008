/**
 * The tokens the daemon accepts, reloadable (SIGHUP). A presented token is
 * compared with every known one in constant time, digests against digests,
 * so neither its length nor how much of it matches shows in the timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Logger } from '../../core/log/logger';
import { readTokenFile, type Scope, type TokenEntry } from './token-file';

interface KnownToken {
  digest: Buffer;
  entry: TokenEntry;
}

const digest = (token: string): Buffer => createHash('sha256').update(token).digest();

export class TokenStore {
  private known: KnownToken[];

  constructor(
    readonly path: string,
    private readonly log: Logger,
  ) {
    this.known = TokenStore.load(path);
  }

  private static load(path: string): KnownToken[] {
    return readTokenFile(path).map((entry) => ({ digest: digest(entry.token), entry }));
  }

  /** Reads the file again; a bad file keeps the tokens in force and says why. */
  reload(): boolean {
    try {
      this.known = TokenStore.load(this.path);
      this.log.info('tokens reloaded', { file: this.path, tokens: this.known.length });
      return true;
    } catch (err) {
      this.log.error('tokens not reloaded; the previous ones stay in force', {
        error: (err as Error).message,
      });
      return false;
    }
  }

  /** The entry of the presented token, or undefined; every entry is compared whatever matches. */
  find(presented: string): { scope: Scope; name: string } | undefined {
    const wanted = digest(presented);
    let found: TokenEntry | undefined;
    for (const known of this.known) if (timingSafeEqual(known.digest, wanted)) found = known.entry;
    return found && { scope: found.scope, name: found.name };
  }
}
