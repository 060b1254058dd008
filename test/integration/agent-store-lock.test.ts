/**
 * One agent per store, by an OS lock on the store file: deleting a file beside the store cannot let
 * a second agent in, and a pid written anywhere (a stale lock of old, a reused pid) cannot keep an
 * agent from starting. Real agents on the real kernel.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-store-lock-');
const agents: AgentProcess[] = [];

afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.stop('SIGKILL');
});

const args = (data: string) => ['--data-dir', data, '--node', 'locked', '--quiet'];

/** A second agent on the same store, to its exit. */
function secondAgent(data: string) {
  return spawnSync(process.execPath, [KREPLAY_BIN, 'agent', ...args(data)], {
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('the store lock (real agents)', () => {
  it('refuses a second agent, naming the first, even with every file beside the store deleted', async () => {
    const data = join(dir.path, 'deleted');
    const first = await startAgent(args(data));
    agents.push(first);
    // what an operator (or a cleanup job) might remove: anything that is not the store itself
    for (const file of readdirSync(data)) if (file !== 'locked.db') rmSync(join(data, file), { force: true });
    rmSync(join(data, 'locked.db.lock'), { force: true });
    const second = secondAgent(data);
    expect(second.status).not.toBe(0);
    expect(second.stderr).toContain(`being written by another kreplay agent (pid ${first.child.pid})`);
    expect(second.stderr).toContain('E_STORE_LOCKED');
    expect(first.child.exitCode).toBeNull();
  });

  it('starts whatever pid a lock file names, and again at once after its predecessor was SIGKILLed', async () => {
    const data = join(dir.path, 'stale');
    const first = await startAgent(args(data));
    expect(await first.stop('SIGKILL')).toBeNull();
    // a lock file of the old kind naming a live pid (1, as after a pid reuse) blocks nothing
    writeFileSync(join(data, 'locked.db.lock'), '1');
    const second = await startAgent(args(data));
    agents.push(second);
    expect(second.output()).not.toContain('E_STORE_LOCKED');
  });
});
