/** The --tokens file: its format, what is refused, and the constant-time lookup. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { parseTokens } from '../../daemon/auth/token-file';
import { TokenStore } from '../../daemon/auth/token-store';
import { useTempDir } from '../support/temp-dir';

const READ = 'r'.repeat(24);
const CONTROL = 'c'.repeat(24);

describe('parseTokens', () => {
  it('reads token scope name lines, skipping comments and blanks', () => {
    expect(parseTokens(`# ops\n\n${READ} read grafana\n  ${CONTROL}   control ci  \n`, 'f')).toEqual([
      { token: READ, scope: 'read', name: 'grafana' },
      { token: CONTROL, scope: 'control', name: 'ci' },
    ]);
  });

  it.each([
    [`${READ} read`, /f:1: expected "token scope name", got 2 fields/],
    [`short read x`, /f:1: token of x is shorter than 16/],
    [`${READ} admin x`, /f:1: scope must be read or control, got "admin"/],
    [`${READ} read a\n${READ} control b`, /f:2: the token of b is listed twice/],
    [`# nothing\n`, /f lists no tokens/],
  ])('refuses %j naming the line', (text, message) => {
    expect(() => parseTokens(text, 'f')).toThrow(expect.objectContaining({ code: 'E_TOKENS' }));
    expect(() => parseTokens(text, 'f')).toThrow(message);
  });
});

describe('TokenStore', () => {
  const dir = useTempDir('kreplay-tokens-');

  it('finds exact tokens only, and reloads (a bad file keeps the old tokens)', () => {
    const file = join(dir.path, 'tokens');
    writeFileSync(file, `${READ} read grafana\n`);
    const store = new TokenStore(file, silentLogger);
    expect(store.find(READ)).toEqual({ scope: 'read', name: 'grafana' });
    expect(store.find(READ.slice(0, -1))).toBeUndefined();
    expect(store.find(`${READ}x`)).toBeUndefined();
    expect(store.find('')).toBeUndefined();

    writeFileSync(file, `${CONTROL} control ci\n`);
    expect(store.reload()).toBe(true);
    expect(store.find(READ)).toBeUndefined();
    expect(store.find(CONTROL)).toEqual({ scope: 'control', name: 'ci' });

    writeFileSync(file, 'garbage\n');
    expect(store.reload()).toBe(false);
    expect(store.find(CONTROL)).toEqual({ scope: 'control', name: 'ci' });
  });
});
