/** The sessions file's lock between daemons (daemon/replay/sessions/file-lock.ts): its wait under a wall clock step. */
import { join } from 'node:path';
import { FileLock } from '../../daemon/replay/sessions/file-lock';
import { newDaemonIdentity } from '../../daemon/replay/sessions/daemon-identity';
import { useTempDir } from '../support/temp-dir';
import { HOUR_MS, useWallStep } from '../support/wall-step';

const dir = useTempDir('kreplay-file-lock-');
const wall = useWallStep();

describe('file lock', () => {
  it('waits for a live holder that lets go, though the wall clock stepped an hour on meanwhile', async () => {
    const path = join(dir.path, 'sessions.lock');
    const holder = new FileLock(path, newDaemonIdentity());
    holder.acquireSync();
    const waiter = new FileLock(path, newDaemonIdentity());
    const acquired = waiter.acquire();
    wall.step(HOUR_MS);
    setTimeout(() => holder.release(), 50);
    await expect(acquired).resolves.toBeUndefined();
    waiter.release();
  });
});
