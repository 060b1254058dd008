import { readFileSync } from 'node:fs';
import { repoRoot } from '../core/repo-root';

export const VERSION: string = (
  JSON.parse(readFileSync(`${repoRoot()}/package.json`, 'utf8')) as { version: string }
).version;
