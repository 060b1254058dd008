/** kreplay's version (package.json), shown by the CLI, the agent's runs and the API description. */
import { readFileSync } from 'node:fs';
import { repoRoot } from './repo-root';

export const VERSION: string = (
  JSON.parse(readFileSync(`${repoRoot()}/package.json`, 'utf8')) as { version: string }
).version;
