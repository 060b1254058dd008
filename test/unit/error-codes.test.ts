/** One registry of error codes (core/error-codes.ts): every code used is in it, and every code in it is used. */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ERROR_CODES, isErrorCode, RETIRED_ERROR_CODES } from '../../core/error-codes';
import { PROBLEM_KINDS, problemCode, type ProblemKind } from '../../core/problem-kinds';

const ROOT = resolve(__dirname, '..', '..');
const REGISTRY = join('core', 'error-codes.ts');

function files(folder: string, endings: string[]): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => endings.some((ending) => file.endsWith(ending)) && !file.includes('node_modules'))
    .map((file) => join(folder, file))
    .filter((file) => file !== REGISTRY);
}

/** Quoted E_… literals (a whole code: not a prefix such as 'E_CAPTURE_') and where they stand. */
function literals(): Map<string, string> {
  const sources = [
    ...['core', 'agent', 'daemon', 'cli'].flatMap((folder) => files(folder, ['.ts'])),
    ...files('native', ['.cc', '.h']),
  ];
  const found = new Map<string, string>();
  for (const file of sources)
    for (const m of readFileSync(join(ROOT, file), 'utf8').matchAll(/['"](E_[A-Z0-9_]*[A-Z0-9])['"]/g))
      if (!found.has(m[1]!)) found.set(m[1]!, file);
  return found;
}

/**
 * Codes git's history shows leaving the registry (`-  E_…:` lines of core/error-codes.ts) or
 * leaving with their problem kind (`-  'kind': {` lines of core/problem-kinds.ts, followed to where
 * it was before). A line moved within the file comes back as a `+` line: its code is registered
 * still.
 */
function removedInHistory(): Set<string> {
  const log = (file: string) =>
    execFileSync('git', ['log', '--follow', '-p', '--format=', '--', file], {
      cwd: ROOT,
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
  const removed = new Set<string>();
  for (const m of log(REGISTRY).matchAll(/^-\s+(E_[A-Z0-9_]+):/gm)) removed.add(m[1]!);
  for (const m of log(join('core', 'problem-kinds.ts')).matchAll(/^-\s+'?([a-z][a-z-]*)'?: \{ status/gm))
    removed.add(problemCode(m[1]! as ProblemKind));
  return removed;
}

describe('error codes', () => {
  it('registers every code the TypeScript and the native addon use', () => {
    const unregistered = [...literals()]
      .filter(([code]) => !isErrorCode(code))
      .map(([c, f]) => `${c} (${f})`);
    expect(unregistered).toEqual([]);
  });

  it('registers no code that nothing uses', () => {
    const used = literals();
    expect(Object.keys(ERROR_CODES).filter((code) => !used.has(code))).toEqual([]);
  });

  it("gives each HTTP problem kind its code, and tells kreplay's codes from others", () => {
    for (const kind of Object.keys(PROBLEM_KINDS) as ProblemKind[])
      expect(isErrorCode(problemCode(kind))).toBe(true);
    expect(problemCode('session-not-found')).toBe('E_SESSION_NOT_FOUND');
    expect(isErrorCode('E_CAPTURE_ATTACH')).toBe(true);
    expect(isErrorCode('SQLITE_FULL')).toBe(false);
    expect(isErrorCode('E_NO_SUCH_CODE')).toBe(false);
    expect(isErrorCode(undefined)).toBe(false);
  });

  it('lists every code it ever removed as retired, so none is reused with another meaning', () => {
    const retired = new Set(Object.keys(RETIRED_ERROR_CODES));
    const removed = [...removedInHistory()].filter((code) => !isErrorCode(code));
    expect(removed.filter((code) => !retired.has(code))).toEqual([]);
    // the check reads the history at all: E_HPACK left the registry in c97964b
    expect(removed).toContain('E_HPACK');
  });

  it('gives no retired code again, neither registered nor used', () => {
    const used = literals();
    for (const code of Object.keys(RETIRED_ERROR_CODES)) {
      expect([code, isErrorCode(code)]).toEqual([code, false]);
      expect([code, used.get(code)]).toEqual([code, undefined]);
    }
  });

  it('says what each code means', () => {
    for (const meaning of [...Object.values(ERROR_CODES), ...Object.values(RETIRED_ERROR_CODES)])
      expect(meaning.length).toBeGreaterThan(10);
  });
});
