/** kreplay's version (package.json), shown by the CLI, the agent's runs and the API description. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './repo-root';

export const VERSION: string = (
  JSON.parse(readFileSync(`${repoRoot()}/package.json`, 'utf8')) as { version: string }
).version;

/** Where `make build` records the commit it built (a .deb or tarball has no .git to ask). */
export const BUILD_INFO_PATH = join('dist', 'build-info.json');

/** The git commit of this build ("1a2b3c4d5e6f", "-dirty" if the tree had changes), or "unknown". */
export function buildCommit(): string {
  try {
    const info = JSON.parse(readFileSync(join(repoRoot(), BUILD_INFO_PATH), 'utf8')) as { commit?: unknown };
    return typeof info.commit === 'string' && info.commit !== '' ? info.commit : 'unknown';
  } catch {
    return 'unknown';
  }
}
