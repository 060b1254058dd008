/**
 * A storm of new files under the real agent (a spool, a cache named by hash, nginx's request
 * bodies: each write a file no write named before): every write is stored or counted, and the
 * agent's anonymous memory stays bounded while V8 sees a new string and entry at every write.
 * Started as users start it (bin/kreplay), whose runtime flags cap the young generation and the
 * old one's growth; without them this storm took it to 315 MiB (docs/operate.md, "The agent's memory").
 */
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventsHandled, residentBytes, startAgent } from '../support/agent-process';
import { startNginx } from '../support/nginx';
import { countStored, droppedWrites } from '../support/store-rows';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const dir = useTempDir('kreplay-file-storm-');
const FILES = 300_000;
/*
 * nginx's bodies: each request's a write of its own and an answer's. Fewer than the writer's files:
 * nginx spools, renames and answers ~3,000 a second here, so this is the real program's check of
 * the same path, and the python storm the one whose memory the launcher's flags decide.
 */
const BODIES = 40_000;
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

/**
 * Runs `storm` under an agent storing node `files` in `data`, scoped to `pid`, until the agent has
 * handled at least `events`; its peak anonymous memory meanwhile.
 */
async function peakUnder(
  data: string,
  pid: number,
  events: number,
  storm: () => Promise<void>,
): Promise<number> {
  const agent = await startAgent([
    ...['--data-dir', data, '--node', 'files', '--max-store-bytes', '0'],
    ...['--pid', String(pid), '--filter-transactions'],
  ]);
  const agentPid = agent.child.pid!;
  let peak = anonRss(agentPid);
  const sampler = setInterval(() => (peak = Math.max(peak, anonRss(agentPid))), 100);
  try {
    await storm();
    await waitFor(() => (eventsHandled(agent.output()) >= events ? true : undefined), 90_000, 200);
  } finally {
    clearInterval(sampler);
    expect(await agent.stop()).toBe(0);
  }
  return peak;
}

/** Stored writes of type sys_write whose file's path contains `part`, and how many files they name. */
function writesNaming(store: string, part: string): { writes: number; files: number } {
  const db = new Database(store, { readonly: true });
  try {
    return db
      .prepare(
        `SELECT count(*) AS writes, count(DISTINCT t.value) AS files FROM events e JOIN targets t ON t.id = e.target
         WHERE e.type = 1 AND t.value LIKE '%' || ? || '%'`,
      )
      .get(part) as { writes: number; files: number };
  } finally {
    db.close();
  }
}

describe('agent under a storm of new files (real kernel)', () => {
  it('stores or counts every write and keeps its anonymous memory bounded', async () => {
    const script = join(dir.path, 'new-files.py');
    writeFileSync(script, WRITER);
    const writer = spawn('python3', [script, join(dir.path, 'spool'), String(FILES)], {
      stdio: ['pipe', 'ignore', 'inherit'],
    });
    const exited = new Promise<number | null>((resolve) => writer.on('exit', resolve));
    const data = join(dir.path, 'data');
    const peak = await peakUnder(data, writer.pid!, FILES, async () => {
      writer.stdin!.end('g');
      expect(await exited).toBe(0);
    });

    const store = join(data, 'files.db');
    const stored = countStored(store, 'type = 1');
    const { writes, files } = writesNaming(store, '/spool/body-');
    expect(stored + droppedWrites(store)).toBe(FILES);
    // each stored write names its own file
    expect(writes).toBe(stored);
    expect(files).toBe(stored);
    expect(peak).toBeLessThan(ANON_BOUND);
  });

  it('stores or counts every request body nginx spools to a new file, and stays bounded (WebDAV PUT, curl)', async () => {
    // nginx's worker runs as nobody: it spools bodies under the prefix and renames them into put/
    chmodSync(dir.path, 0o755);
    const prefix = join(dir.path, 'nginx');
    mkdirSync(join(prefix, 'put'), { recursive: true });
    chmodSync(join(prefix, 'put'), 0o777);
    const nginx = await startNginx(prefix, `root ${prefix}/put; location / { dav_methods PUT; }`);
    const body = join(dir.path, 'body');
    writeFileSync(body, 'x');
    const data = join(dir.path, 'data');
    let answers = '';
    try {
      const peak = await peakUnder(data, nginx.worker, 2 * BODIES, async () => {
        // one PUT of the same name a request, four at a time on kept-alive connections; a status line each
        const curl = spawn(
          'curl',
          [
            '-sS',
            ...['--parallel', '--parallel-max', '4'],
            '-w',
            '%{http_code}\\n',
            '-T',
            body,
            `http://127.0.0.1:${nginx.port}/put-target?[1-${BODIES}]`,
          ],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
        curl.stdout.on('data', (chunk: Buffer) => (answers += chunk.toString()));
        expect(await new Promise((resolve) => curl.on('exit', resolve))).toBe(0);
      });
      expect(answers.split('\n').filter((code) => code === '201' || code === '204')).toHaveLength(BODIES);

      const store = join(data, 'files.db');
      const { writes, files } = writesNaming(store, `${prefix}/body/`);
      const dropped = droppedWrites(store);
      // every body is a write of its own to a file of its own, stored, or counted among the drops
      expect(files).toBe(writes);
      expect(writes).toBeLessThanOrEqual(BODIES);
      expect(writes + dropped).toBeGreaterThanOrEqual(BODIES);
      console.log(
        `nginx storm: ${writes} bodies stored, ${dropped} writes dropped, agent anonymous peak ${(peak / MiB).toFixed(0)} MiB`,
      );
      expect(peak).toBeLessThan(ANON_BOUND);
    } finally {
      await nginx.stop();
    }
  });
});
