/**
 * Event streams are bounded: idle connections past --max-streams are refused
 * with 503 and the daemon's memory stays bounded; a watcher that does not read
 * is cut off at its send buffer (counted and logged) while the others get
 * every event.
 */
import { join } from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request, Agent, type ClientRequest } from 'node:http';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { SEND_BUFFER } from '../../daemon/replay/send-buffer';
import { startDaemonProcess } from '../../bench/daemon-process';
import { writeStore } from '../support/event-store';
import { api, StreamClient } from '../support/replay-http';
import { waitFor } from '../support/wait';
import { useTempDir } from '../support/temp-dir';

const dir = useTempDir('kreplay-streams-');
const T0 = 1_795_345_678_000_000_000n;

/** Asks for a stream with a 4 KiB receive buffer, reads nothing until SIGUSR1, then reads to the end: "events bytes". */
const SLOW_READER = `
import signal, socket, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", int(sys.argv[1])))
s.sendall(("GET %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n" % sys.argv[2]).encode())
signal.sigwait([signal.SIGUSR1])
data = b""
while True:
    chunk = s.recv(1 << 16)
    if not chunk:
        break
    data += chunk
print(data.count(b"event: replay"), len(data))
`;

const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

describe('event stream bounds', () => {
  let daemon: Daemon | undefined;
  let cli: ChildProcess | undefined;
  afterEach(async () => {
    await daemon?.close();
    daemon = undefined;
    cli?.kill('SIGKILL');
    cli = undefined;
  });

  it('refuses idle streams past --max-streams with 503, memory bounded, and serves again once they close', async () => {
    writeStore(dir.path, 'n1', [
      { ts: T0, txn: 'tx' },
      { ts: T0 + 60_000_000_000n, txn: 'tx' },
    ]);
    const started = await startDaemonProcess(
      ['--data-dir', dir.path, '--max-streams', '1024', '--max-streams-per-client', '100000'],
      join(dir.path, 'daemon.log'),
    );
    cli = started.child;
    const created = await api(started.url, 'POST', '', { transaction_id: 'tx' });
    const path = `/api/replay/sessions/${created.body.id as string}/events`;
    const rssBefore = rssMiB(cli.pid!);
    const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
    const open: ClientRequest[] = [];
    const statuses = await Promise.all(
      Array.from(
        { length: 5000 },
        () =>
          new Promise<number>((resolve) => {
            const req = request(`${started.url}${path}`, { agent }, (res) => {
              if (res.statusCode !== 200) res.resume();
              resolve(res.statusCode ?? 0);
            });
            req.on('error', () => resolve(-1));
            req.end();
            open.push(req);
          }),
      ),
    );
    const count = (status: number) => statuses.filter((s) => s === status).length;
    expect(count(200)).toBe(1024);
    expect(count(503)).toBe(5000 - 1024);
    const rssGrowth = rssMiB(cli.pid!) - rssBefore;
    // 1,024 idle streams hold sockets and little else; well under their 256 MiB buffer allowance
    expect(rssGrowth).toBeLessThan(256);
    // the API still answers everyone else
    expect((await fetch(`${started.url}/api/events?limit=1`)).status).toBe(200);
    for (const req of open) req.destroy();
    // once they close, a new stream is served
    const again = () =>
      new Promise<number>((resolve) => {
        const req = request(`${started.url}${path}`, (res) => {
          resolve(res.statusCode ?? 0);
          req.destroy();
        });
        req.on('error', () => resolve(-1));
        req.end();
      });
    await waitFor(async () => (await again()) === 200, {
      everyMs: 100,
      what: 'a stream served once the others closed',
    });
  }, 120_000);

  it('answers 413 to a control body over 16 KiB, and goes on serving', async () => {
    writeStore(dir.path, 'n1', [{ ts: T0, txn: 'tx' }]);
    daemon = await createDaemon({ dataDir: dir.path, log: silentLogger });
    const big = await fetch(`${daemon.url}/api/replay/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ transaction_id: 'x'.repeat(17 * 1024) }),
    });
    expect(big.status).toBe(413);
    expect(big.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await big.json()).toMatchObject({ code: 'E_BODY_TOO_LARGE' });
    expect((await api(daemon.url, 'POST', '', { transaction_id: 'tx' })).status).toBe(201);
  });

  it('limits streams per client, and names the client', async () => {
    writeStore(dir.path, 'n1', [
      { ts: T0, txn: 'tx' },
      { ts: T0 + 60_000_000_000n, txn: 'tx' },
    ]);
    daemon = await createDaemon({ dataDir: dir.path, log: silentLogger, maxStreamsPerClient: 2 });
    const created = await api(daemon.url, 'POST', '', { transaction_id: 'tx' });
    const id = created.body.id as string;
    const first = await StreamClient.open(daemon.url, id);
    const second = await StreamClient.open(daemon.url, id);
    const refused = await fetch(`${daemon.url}/api/replay/sessions/${id}/events`);
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({
      code: 'E_TOO_MANY_STREAMS',
      detail: expect.stringContaining('loopback has 2 event streams open'),
    });
    first.close();
    second.close();
  });

  it('cuts off a watcher that does not read at its send buffer; the others get every event', async () => {
    // 20,000 events of ~500 bytes over 8 s: more than the kernel buffers hold for a client that never reads
    const EVENTS = 20_000;
    writeStore(
      dir.path,
      'n1',
      Array.from({ length: EVENTS }, (_, i) => ({ ts: T0 + BigInt(i) * 400_000n, txn: 'dense' })),
    );
    // the daemon in a process of its own, as deployed: the readers here do not share its event loop
    const started = await startDaemonProcess(['--data-dir', dir.path], join(dir.path, 'daemon.log'));
    cli = started.child;
    const url = started.url;
    const created = await api(url, 'POST', '', { transaction_id: 'dense' });
    const id = created.body.id as string;
    const { port } = new URL(url);
    // a client with a small receive buffer that asks, sleeps until the replay is over, then reads what it got
    const slow = spawn('python3', ['-c', SLOW_READER, port, `/api/replay/sessions/${id}/events`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let slowOut = '';
    slow.stdout.on('data', (chunk: Buffer) => (slowOut += chunk.toString()));
    const slowDone = new Promise((resolve) => slow.once('exit', resolve));
    // the slow reader's stream is open (its request read, its watcher counted) before the replay starts
    const watchers = async () =>
      Number(/^kreplay_sse_watchers (\d+)$/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1]);
    await waitFor(async () => (await watchers()) === 1, { what: "the slow reader's stream" });
    const fast = await StreamClient.open(url, id);
    await api(url, 'POST', `/${id}/play`);
    await fast.until((s) => s.states().includes('finished'), 60_000);
    expect(fast.replays()).toHaveLength(EVENTS);
    fast.close();
    slow.kill('SIGUSR1');
    await slowDone;
    const [events, bytes] = slowOut.trim().split(' ').map(Number);
    expect(events).toBeLessThan(EVENTS);
    expect(bytes).toBeGreaterThan(SEND_BUFFER.softBytes);
    // the cut is counted and logged, the fast reader's stream not
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(/^kreplay_sse_streams_cut_total (\d+)$/m.exec(metrics)?.[1]).toBe('1');
    const cuts = readFileSync(join(dir.path, 'daemon.log'), 'utf8')
      .split('\n')
      .filter((line) => line.includes('event stream cut'));
    expect(cuts).toHaveLength(1);
    expect(cuts[0]).toContain('loopback');
  }, 90_000);
});
