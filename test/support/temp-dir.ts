import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A fresh directory per test, removed afterwards. Removal waits for the next
 * test's start (or the file's end): jest runs a block's afterEach hooks in the
 * order they were declared, so removing it in an afterEach of its own would
 * race the daemons and agents that the test's later afterEach hooks close,
 * which still write into it while they stop (ENOTEMPTY).
 */
export function useTempDir(prefix = 'kreplay-test-'): { path: string } {
  const holder = { path: '' };
  const remove = () => {
    if (holder.path) rmSync(holder.path, { recursive: true, force: true });
  };
  beforeEach(() => {
    remove();
    holder.path = mkdtempSync(join(tmpdir(), prefix));
  });
  afterAll(remove);
  return holder;
}
