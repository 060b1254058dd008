/**
 * The --tokens file: one `token scope name` per line, `#` comments and blank
 * lines ignored. `read` lets a client query events and watch sessions;
 * `control` also lets it create, play, pause, seek, stop and delete them.
 */
import { readFileSync } from 'node:fs';
import { KreplayError } from '../../core/errors';

export const SCOPES = ['read', 'control'] as const;
export type Scope = (typeof SCOPES)[number];

export interface TokenEntry {
  token: string;
  scope: Scope;
  name: string;
}

/** Shorter tokens are guessable; 16 characters of a random token carry ≥ 80 bits. */
export const MIN_TOKEN_LENGTH = 16;

export class TokenFileError extends KreplayError {
  constructor(message: string) {
    super('E_TOKENS', message);
  }
}

export function parseTokens(text: string, source: string): TokenEntry[] {
  const entries: TokenEntry[] = [];
  const seen = new Set<string>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${source}:${i + 1}`;
    const fields = line.split(/\s+/);
    if (fields.length !== 3)
      throw new TokenFileError(`${where}: expected "token scope name", got ${fields.length} fields`);
    const [token, scope, name] = fields as [string, string, string];
    if (token.length < MIN_TOKEN_LENGTH)
      throw new TokenFileError(`${where}: token of ${name} is shorter than ${MIN_TOKEN_LENGTH} characters`);
    if (!SCOPES.includes(scope as Scope))
      throw new TokenFileError(`${where}: scope must be ${SCOPES.join(' or ')}, got "${scope}"`);
    if (seen.has(token)) throw new TokenFileError(`${where}: the token of ${name} is listed twice`);
    seen.add(token);
    entries.push({ token, scope: scope as Scope, name });
  });
  if (entries.length === 0)
    throw new TokenFileError(`${source} lists no tokens: every request would be refused`);
  return entries;
}

export function readTokenFile(path: string): TokenEntry[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new TokenFileError(`cannot read the tokens file ${path}: ${(err as Error).message}`);
  }
  return parseTokens(text, path);
}
