/**
 * A storm of new files under the real agent (a spool, a cache named by hash, nginx's request
 * bodies: each write a file no write named before): every write is stored or counted, and the
 * agent's anonymous memory stays bounded while V8 sees a new string and entry at every write.
 * Started as users start it (bin/kreplay), whose runtime flags cap the young generation and the
 * old one's growth; without them this storm took it to 315 MiB (docs/operate.md, "The agent's memory").
 */
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventsHandled, residentBytes, startAgent } from '../support/agent-process';
import { countStored, droppedWrites } from '../support/store-rows';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const dir = useTempDir('kreplay-file-storm-');
const FILES = 300_000;
const MiB = 1024 * 1024;
/* 172 MiB measured with the launcher's flags, 315 without them */
const ANON_BOUND = 224 * MiB;

/* Waits for a byte on stdin, then writes FILES new files once each, removing each after its write. */
const WRITER = `
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
sys.stdin.read(1)
for i in range(n):
    p = f"{d}/body-{i:010d}"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x")
    os.close(fd)
    os.unlink(p)
`;

const anonRss = (pid: number) => residentBytes(pid, 'RssAnon');

describe('agent under a storm of new files (real kernel)', () => {
  it('stores or counts every write and keeps its anonymous memory bounded', async () => {
    const script = join(dir.path, 'new-files.py');
    writeFileSync(script, WRITER);
    const writer = spawn('python3', [script, join(dir.path, 'spool'), String(FILES)], {
      stdio: ['pipe', 'ignore', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => writer.on('exit', resolve));
    const data = join(dir.path, 'data');
    const agent = await startAgent([
      ...['--data-dir', data, '--node', 'files', '--max-store-bytes', '0'],
      ...['--pid', String(writer.pid), '--filter-transactions'],
    ]);
    const pid = agent.child.pid!;
    let peak = anonRss(pid);
    const sampler = setInterval(() => (peak = Math.max(peak, anonRss(pid))), 100);
    try {
      writer.stdin!.end('g');
      expect(await exited).toBe(0);
      await waitFor(() => (eventsHandled(agent.output()) >= FILES ? true : undefined), 90_000, 200);
    } finally {
      clearInterval(sampler);
    }
    expect(await agent.stop()).toBe(0);

    const store = join(data, 'files.db');
    const stored = countStored(store, 'type = 1');
    const dropped = droppedWrites(store);
    const db = new Database(store, { readonly: true });
    const named = db
      .prepare(
        `SELECT count(DISTINCT t.value) FROM events e JOIN targets t ON t.id = e.target WHERE e.type = 1 AND t.value LIKE '%/spool/body-%'`,
      )
      .pluck()
      .get() as number;
    db.close();
    expect(stored + dropped).toBe(FILES);
    // each stored write names its own file
    expect(named).toBe(stored);
    expect(peak).toBeLessThan(ANON_BOUND);
  });
});
