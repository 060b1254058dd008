/** The generated reference pages (tools/reference-pages.ts) are as their sources make them today. */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { referencePages } from '../../tools/reference-pages';

const ROOT = resolve(__dirname, '..', '..');

describe('generated reference pages', () => {
  it.each(Object.entries(referencePages()))('%s is current (else run `make docs`)', (path, text) => {
    expect(readFileSync(join(ROOT, path), 'utf8')).toBe(text);
  });

  it('covers every command, route and code', () => {
    const pages = referencePages();
    expect(pages['docs/reference/cli.md']).toContain('## `kreplay replay`');
    expect(pages['docs/reference/cli.md']).toContain('## `kreplay incident show`');
    expect(pages['docs/reference/http-api.md']).toContain('## `GET /api/events`');
    expect(pages['docs/reference/errors.md']).toContain('| `E_STORE_LOCKED` |');
    expect(pages['docs/reference/errors.md']).toContain(
      'session-not-found` | 404 Not Found | `E_SESSION_NOT_FOUND` |',
    );
  });
});
