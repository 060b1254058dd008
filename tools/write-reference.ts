/** `make docs`: writes the generated reference pages (tools/reference-pages.ts). */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { repoRoot } from '../core/repo-root';
import { referencePages } from './reference-pages';

for (const [path, text] of Object.entries(referencePages())) {
  const file = join(repoRoot(), path);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
  process.stdout.write(`wrote ${path}\n`);
}
