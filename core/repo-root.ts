import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { KreplayError } from './errors';

/** The checkout's root, found from sources (ts-jest) and from dist/ alike. */
export function repoRoot(): string {
  let dir = __dirname;
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new KreplayError('E_NO_CHECKOUT', `no package.json above ${__dirname}`);
    dir = parent;
  }
  return dir;
}
