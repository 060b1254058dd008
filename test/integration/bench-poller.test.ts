/**
 * The replay benches' poller (bench/replay-poller.ts, issue 48), the built one a bench starts: in a
 * process of its own, it asks /healthz and an event page in turn on one kept-alive connection until
 * its stdin closes, then prints their latencies; an answer other than 200 fails it, naming the URL.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { repoRoot } from '../../core/repo-root';
import type { PollResult } from '../../bench/replay-poller';

const POLLER = join(repoRoot(), 'dist', 'bench', 'replay-poller.js');

interface Served {
  server: Server;
  url: string;
  paths: string[];
  connections: number;
  /** resolves once `n` requests were answered */
  seen(n: number): Promise<void>;
}

async function serve(status: (path: string) => number): Promise<Served> {
  const waiting: { n: number; resolve: () => void }[] = [];
  const served: Omit<Served, 'server' | 'url'> = {
    paths: [],
    connections: 0,
    seen: (n) =>
      new Promise((resolve) => (served.paths.length >= n ? resolve() : waiting.push({ n, resolve }))),
  };
  const server = createServer((req, res) => {
    served.paths.push(req.url!);
    res.writeHead(status(req.url!), { 'content-type': 'application/json' }).end('{"ok":true}');
    for (const w of waiting.filter((w) => served.paths.length >= w.n)) w.resolve();
  });
  server.on('connection', () => served.connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return Object.assign(served, { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

function startPoller(url: string) {
  const child = spawn(process.execPath, [POLLER, url, '1', '3'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const exited = new Promise<{ code: number | null; out: string; err: string }>((resolve) =>
    child.once('exit', (code) => resolve({ code, out, err })),
  );
  return { child, exited };
}

describe('the replay benches poller', () => {
  test('asks /healthz and the lookups in turn on one connection until its stdin closes', async () => {
    const served = await serve(() => 200);
    try {
      const { child, exited } = startPoller(served.url);
      await served.seen(8);
      child.stdin.end();
      const { code, out } = await exited;
      expect(code).toBe(0);
      const result = JSON.parse(out) as PollResult;
      // it stops after a whole pair: one latency per request asked, none lost
      expect(result.health.length).toBe(result.lookup.length);
      expect(result.health.length + result.lookup.length).toBe(served.paths.length);
      expect(served.paths.length).toBeGreaterThanOrEqual(8);
      expect(served.paths.slice(0, 8)).toEqual([
        '/healthz',
        '/api/events?transaction_id=lookup-0',
        '/healthz',
        '/api/events?transaction_id=lookup-1',
        '/healthz',
        '/api/events?transaction_id=lookup-2',
        '/healthz',
        '/api/events?transaction_id=lookup-0',
      ]);
      for (const ms of [...result.health, ...result.lookup]) expect(ms > 0 && Number.isFinite(ms)).toBe(true);
      expect(served.connections).toBe(1);
    } finally {
      served.server.close();
    }
  });

  test('fails on an answer other than 200, naming the request', async () => {
    const served = await serve((path) => (path.startsWith('/api/events') ? 503 : 200));
    try {
      const { code, out, err } = await startPoller(served.url).exited;
      expect(code).not.toBe(0);
      expect(out).toBe('');
      expect(err).toContain(`${served.url}/api/events?transaction_id=lookup-0: 503`);
      expect(served.paths).toEqual(['/healthz', '/api/events?transaction_id=lookup-0']);
    } finally {
      served.server.close();
    }
  });
});
