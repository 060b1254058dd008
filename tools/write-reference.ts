/** `make docs`: writes the generated reference pages (tools/reference-pages.ts). */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { repoRoot } from '../core/repo-root';
import { referencePages } from './reference-pages';

async function main(): Promise<void> {
  for (const [path, text] of Object.entries(await referencePages())) {
    const file = join(repoRoot(), path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
    process.stdout.write(`wrote ${path}\n`);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${String(err)}\n`);
  process.exitCode = 1;
});
