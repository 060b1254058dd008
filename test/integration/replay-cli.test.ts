import { execFile, spawn } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { writeStore } from '../support/event-store';
import { fetchAllPages } from '../support/events-http';
import { straced } from '../support/strace';
import { api, startReplayServer, type ReplayServer } from '../support/replay-http';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const BIN = join(__dirname, '..', '..', 'bin', 'kreplay.js');
const dir = useTempDir('kreplay-replay-cli-');
const T0 = 1_795_345_678_123_456_789n;

/**
 * A proxy to `target` that holds back its answers to POST .../play until
 * `release` is called: what the CLI does meanwhile shows whether it waits
 * for its play's answer before reading the stream.
 */
async function holdingPlays(
  target: string,
): Promise<{ url: string; plays: number; release(): void; close(): Promise<void> }> {
  const held: (() => void)[] = [];
  let released = false;
  const state = { plays: 0 };
  const server: Server = createServer((req, res) => {
    const upstream = request(
      `${target}${req.url}`,
      { method: req.method, headers: req.headers },
      (answer) => {
        const forward = () => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        };
        if (req.method === 'POST' && req.url!.endsWith('/play') && !released) {
          state.plays++;
          held.push(forward);
        } else forward();
      },
    );
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get plays() {
      return state.plays;
    },
    release() {
      released = true;
      for (const forward of held.splice(0)) forward();
    },
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/* Asynchronous: the daemon answering the CLI runs in this very process. */
function kreplay(...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('kreplay replay', () => {
  let server: ReplayServer;
  beforeEach(async () => {
    for (const [n, node] of ['n1', 'n2'].entries()) {
      const quick = Array.from({ length: 15 }, (_, i) => ({
        ts: T0 + BigInt(2 * i + n) * 1_000_000n,
        txn: 'tx',
      }));
      const slow = Array.from({ length: 10 }, (_, i) => ({
        ts: T0 + BigInt(2 * i + n) * 1_000_000_000n,
        txn: 'slow',
      }));
      writeStore(dir.path, node, [...quick, ...slow]);
    }
    server = await startReplayServer(dir.path);
  });
  afterEach(() => server.close());

  it('prints every event as NDJSON with exact integers, in order, and exits 0', async () => {
    const out = await kreplay(
      'replay',
      'tx',
      '--speed',
      '20',
      '--extra-latency-ns',
      '1000',
      '--server',
      server.url,
    );
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    const lines = out.stdout.trim().split('\n');
    const recorded = await fetchAllPages(server.url, 'transaction_id=tx');
    expect(lines).toHaveLength(30);
    lines.forEach((line, i) => {
      expect(line).toContain(`"timestamp_ns":${recorded[i]!.timestamp_ns},`);
      expect(JSON.parse(line)).toMatchObject({
        event_id: recorded[i]!.event_id,
        replay_offset_ns: i * 50_000 + i * 1000,
        replayed_duration_ns: 1050,
        emitted_late_ns: expect.any(Number),
      });
    });
    const sessions = (await api(server.url, 'GET', '')).body.sessions as Record<string, unknown>[];
    expect(sessions).toEqual([expect.objectContaining({ state: 'finished', speed_factor: 20 })]);
  });

  it('prints the first events as they come, before its play is answered, like every later one', async () => {
    const proxy = await holdingPlays(server.url);
    const child = spawn(process.execPath, [BIN, 'replay', 'tx', '--server', proxy.url]);
    try {
      let stdout = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      // the daemon played the session (its answer is held): the events stream in meanwhile
      await waitFor(() => proxy.plays === 1);
      await waitFor(() => stdout.split('\n').length > 30, {
        what: 'all 30 events printed while the play answer is held',
      });
      proxy.release();
      expect(await exited).toBe(0);
      const lines = stdout.trim().split('\n');
      expect(
        lines.map((line) => (JSON.parse(line) as { replay_offset_ns: number }).replay_offset_ns),
      ).toEqual(Array.from({ length: 30 }, (_, i) => i * 1_000_000));
    } finally {
      child.kill();
      await proxy.close();
    }
  });

  it('runs its way out once before the first event, writing no bytes, then prints every event in order', async () => {
    // the first event must not be the first to meet the code and the call that print it: the CLI
    // goes through them before its play, with nothing to print, which no reader of stdout sees
    const { out, byTid } = await straced(dir.path, 'write,writev', [
      process.execPath,
      BIN,
      'replay',
      'tx',
      '--server',
      server.url,
    ]);
    const toStdout = [...byTid.values()].flatMap((calls) => calls.filter(([, fd]) => fd === 1));
    expect(toStdout.length).toBeGreaterThan(1);
    expect(toStdout[0]).toEqual([expect.stringMatching(/^writev?$/), 1, 0, 0]);
    expect(toStdout.slice(1).every(([, , size, ret]) => size > 0 && ret === size)).toBe(true);
    expect(toStdout.reduce((sum, [, , , ret]) => sum + ret, 0)).toBe(Buffer.byteLength(out));
    const lines = out.trim().split('\n');
    expect(lines.map((line) => (JSON.parse(line) as { replay_offset_ns: number }).replay_offset_ns)).toEqual(
      Array.from({ length: 30 }, (_, i) => i * 1_000_000),
    );
  });

  it('exits 1 printing the problem for a transaction without events', async () => {
    const out = await kreplay('replay', 'nope', '--server', server.url);
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(/server answered 404 Not Found: no events with transaction_id "nope"/);
  });

  it.each([
    [['replay', 'tx', '--speed', '0'], /--speed.*0\.001\.\.1000/],
    [['replay', 'tx', '--extra-latency-ns', '1.5'], /--extra-latency-ns.*expected an integer/],
    [['replay', 'tx', '--server', 'ftp://x'], /--server/],
    [['replay'], /transaction-id/],
  ])('exits 2 naming the flag for %j', async (args, message) => {
    const out = await kreplay(...args);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
  });

  it('stops the session and exits 130 on Ctrl-C', async () => {
    const child = spawn(process.execPath, [BIN, 'replay', 'slow', '--server', server.url]);
    let stdout = '';
    child.stdout.setEncoding('utf8');
    const firstLine = new Promise<void>((resolve) =>
      child.stdout.on('data', (chunk: string) => {
        stdout += chunk;
        if (stdout.includes('\n')) resolve();
      }),
    );
    await firstLine;
    child.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(130);
    const sessions = (await api(server.url, 'GET', '')).body.sessions as Record<string, unknown>[];
    expect(sessions).toEqual([expect.objectContaining({ transaction_id: 'slow', state: 'stopped' })]);
  });
});
