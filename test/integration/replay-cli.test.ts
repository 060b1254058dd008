import { execFile, spawn } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { selfSignedCert } from '../../bench/tls-cert';
import { openReplayStream } from '../../cli/replay-stream';
import { silentLogger } from '../../core/log/logger';
import { createDaemon } from '../../daemon/create-daemon';
import { writeStore } from '../support/event-store';
import { fetchAllPages } from '../support/events-http';
import { straced } from '../support/strace';
import { api, startReplayServer, type ReplayServer } from '../support/replay-http';
import { useTempDir } from '../support/temp-dir';
import { SHORTEST_SLICE_NS, threadSlices } from '../support/thread-slices';
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

/** Where a cutting proxy ends the first event stream: inside a frame's id or data line, or between frames. */
type Cut = 'inside id' | 'inside data' | 'between frames' | 'between the two newlines';

/**
 * Where in `bytes` (a stream's response, head included) to cut at or after
 * `from`: the bytes to forward (`at`) and the id of the last frame they hold
 * whole; null while the frame to cut in has not all come.
 */
function cutPoint(bytes: Buffer, from: number, cut: Cut): { at: number; lastWhole: number } | null {
  const frameEnd = bytes.indexOf('\n\nid: ', from);
  if (frameEnd === -1) return null;
  const start = frameEnd + 2;
  const idEnd = bytes.indexOf('\n', start);
  const dataAt = bytes.indexOf('\ndata: ', start);
  if (idEnd === -1 || dataAt === -1 || bytes.length < dataAt + 40) return null;
  const id = Number(bytes.toString('latin1', start + 'id: '.length, idEnd));
  if (cut === 'inside id') return { at: start + 'id: '.length + 1, lastWhole: id - 1 };
  if (cut === 'inside data') return { at: dataAt + 20, lastWhole: id - 1 };
  if (cut === 'between frames') return { at: start, lastWhole: id - 1 };
  // the frame before ends with one newline of its two: it is not whole
  return { at: start - 1, lastWhole: id - 2 };
}

/**
 * A TCP proxy to `target` that ends the first event stream it carries once
 * `afterBytes` of it passed, at the `cut` (a FIN after the bytes, or a reset
 * with `reset`), and notes the Last-Event-ID every event stream asked with.
 */
async function cuttingProxy(
  target: string,
  cut: Cut,
  afterBytes: number,
  reset: boolean,
): Promise<{ url: string; asked: (string | undefined)[]; lastWhole: number | null; close(): Promise<void> }> {
  const { hostname, port } = new URL(target);
  const state = { asked: [] as (string | undefined)[], lastWhole: null as number | null };
  const sockets = new Set<Socket>();
  const server = createTcpServer((client) => {
    const upstream = connect(Number(port), hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined).on('close', () => sockets.delete(socket));
    }
    // which event stream the connection carries now (0: none); a kept-alive one carries the POSTs before
    let stream = 0;
    client.on('data', (chunk: Buffer) => {
      // a request's head comes in one read (the CLI asks nothing while it waits for an answer)
      const head = /^GET \S+\/events HTTP\/1\.1\r\n([\s\S]*?)\r\n\r\n/.exec(chunk.toString('latin1'));
      if (head) {
        state.asked.push(/^last-event-id: *(.*)$/im.exec(head[1]!)?.[1]?.trim());
        stream = state.asked.length;
      }
      upstream.write(chunk);
    });
    let answer = Buffer.alloc(0);
    let forwarded = 0;
    let cutDone = false;
    upstream.on('data', (chunk: Buffer) => {
      if (stream !== 1) return void client.write(chunk);
      if (cutDone) return;
      answer = Buffer.concat([answer, chunk]);
      const from = answer.indexOf('\r\n\r\n') + 4 + afterBytes;
      const point = cutPoint(answer, from, cut);
      const to = point ? point.at : Math.min(answer.length, from);
      if (to > forwarded) client.write(answer.subarray(forwarded, to));
      forwarded = Math.max(forwarded, to);
      if (!point) return;
      cutDone = true;
      state.lastWhole = point.lastWhole;
      upstream.destroy();
      if (reset) client.resetAndDestroy();
      else client.end();
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => {
      if (!cutDone) client.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked: state.asked,
    get lastWhole() {
      return state.lastWhole;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/* Asynchronous: the daemon answering the CLI runs in this very process. */
function kreplay(...args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return kreplayWith(process.env, ...args);
}

function kreplayWith(
  env: NodeJS.ProcessEnv,
  ...args: string[]
): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const options = { timeout: 60_000, maxBuffer: 64 << 20, env };
    execFile(process.execPath, [BIN, ...args], options, (err, stdout, stderr) => {
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

  it('reads its stream over HTTPS from a daemon whose certificate it trusts; its stream refuses one it does not', async () => {
    const { cert, key } = selfSignedCert(dir.path);
    const tls = await createDaemon({ dataDir: dir.path, tls: { cert, key }, log: silentLogger });
    try {
      expect(tls.url).toMatch(/^https:/);
      const out = await kreplayWith(
        { ...process.env, NODE_EXTRA_CA_CERTS: cert },
        'replay',
        'tx',
        '--speed',
        '20',
        '--server',
        tls.url,
      );
      expect(out.stderr).toBe('');
      expect(out.status).toBe(0);
      const offsets = out.stdout
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { replay_offset_ns: number }).replay_offset_ns);
      expect(offsets).toEqual(Array.from({ length: 30 }, (_, i) => i * 50_000));
      // a stream from a server whose certificate is not trusted is refused, as node:https refuses it
      await expect(openReplayStream(`${tls.url}/api/replay/sessions/s/events`)).rejects.toMatchObject({
        code: 'DEPTH_ZERO_SELF_SIGNED_CERT',
      });
    } finally {
      await tls.close();
    }
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

  it("reads and prints its stream on the fair scheduler's shortest slice, its main thread alone", async () => {
    // on a busy host the reader then runs as its events come instead of waiting out a neighbour's slice
    const child = spawn(process.execPath, [
      BIN,
      'replay',
      'slow',
      '--server',
      server.url,
      '--log-level',
      'debug',
      '--log-format',
      'json',
    ]);
    try {
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      await waitFor(() => stdout.includes('\n'), { what: 'the first event printed' });
      // read while the stream plays (its next event is a second away)
      const slices = threadSlices(child.pid!);
      expect(slices.get(child.pid!)).toBe(SHORTEST_SLICE_NS);
      expect([...slices.values()].filter((ns) => ns === SHORTEST_SLICE_NS)).toHaveLength(1);
      child.kill('SIGINT');
      expect(await exited).toBe(130);
      const said = stderr
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(said).toEqual([
        expect.objectContaining({
          level: 'debug',
          msg: "the stream's reader runs on the fair scheduler's slice 0.1 ms",
          thread: child.pid,
        }),
      ]);
    } finally {
      child.kill();
    }
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

describe('kreplay replay, a dense session', () => {
  /** 3,000 events over 0.3 s on two nodes, half of them tied with the other node's (ordered by id) */
  const PER_NODE = 1500;
  let server: ReplayServer;
  beforeEach(async () => {
    for (const [n, node] of ['n1', 'n2'].entries()) {
      const events = Array.from({ length: PER_NODE }, (_, i) => ({
        ts: T0 + BigInt(2 * i) * 100_000n + (n === 1 && i % 2 === 0 ? 100_000n : 0n),
        txn: 'dense',
      }));
      writeStore(dir.path, node, events);
    }
    server = await startReplayServer(dir.path);
  });
  afterEach(() => server.close());

  it.each([
    ['inside id', 60_000, false],
    ['inside data', 300_000, false],
    ['between frames', 500_000, false],
    ['between the two newlines', 700_000, false],
    ['inside id', 450_000, true],
    ['inside data', 900_000, true],
  ] as [Cut, number, boolean][])(
    'resumes after its connection drops (%s, %d bytes in, reset: %s): every event once, in order',
    async (cut, afterBytes, reset) => {
      const recorded = await fetchAllPages(server.url, 'transaction_id=dense');
      expect(recorded).toHaveLength(2 * PER_NODE);
      const proxy = await cuttingProxy(server.url, cut, afterBytes, reset);
      try {
        const out = await kreplay('replay', 'dense', '--server', proxy.url);
        expect(out.stderr).toBe('');
        expect(out.status).toBe(0);
        const lines = out.stdout.trim().split('\n');
        const printed = lines.map(
          (line) => JSON.parse(line) as { event_id: string; replay_offset_ns: number },
        );
        // a duplicate or a loss shows in the ids; the offsets show the index each was framed with
        expect(printed.map((event) => event.event_id)).toEqual(recorded.map((event) => event.event_id));
        expect(printed.map((event) => event.replay_offset_ns)).toEqual(
          recorded.map((event) => Number(event.timestamp_ns - recorded[0]!.timestamp_ns)),
        );
        // the stream was cut before its end, and resumed once, after the last frame the CLI had whole
        // (a reset may lose what the CLI's socket held: then earlier)
        const lastWhole = proxy.lastWhole!;
        expect(lastWhole).toBeGreaterThan(0);
        expect(lastWhole).toBeLessThan(2 * PER_NODE - 1);
        expect(proxy.asked).toHaveLength(2);
        expect(proxy.asked[0]).toBeUndefined();
        if (reset) expect(Number(proxy.asked[1])).toBeLessThanOrEqual(lastWhole);
        else expect(proxy.asked[1]).toBe(String(lastWhole));
      } finally {
        await proxy.close();
      }
    },
  );
});
