/** What a node store takes on disk: its file and its WAL, either of which may be missing (0). */
import { statSync } from 'node:fs';

function sizeOrZero(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

export function storeFileBytes(path: string): number {
  return sizeOrZero(path) + sizeOrZero(`${path}-wal`);
}
