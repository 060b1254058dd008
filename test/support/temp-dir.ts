import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh directory per test file, removed afterwards. */
export function useTempDir(prefix = 'kreplay-test-'): { path: string } {
  const holder = { path: '' };
  beforeEach(() => {
    holder.path = mkdtempSync(join(tmpdir(), prefix));
  });
  afterEach(() => {
    rmSync(holder.path, { recursive: true, force: true });
  });
  return holder;
}
