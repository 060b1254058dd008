/**
 * `kreplay replay --exec` against a slow upstream and a slow connect: the
 * build's connect is answered with a socket to kreplay's loopback relay,
 * which delays each response by the incident's response time, so the build's
 * own timeout fires (or not) whatever it waits in: CPython's socket timeout
 * (poll), curl's --max-time (its multi loop), Node's http timeout (epoll).
 * A non-blocking connect the build polls completes at the incident's connect
 * time. The mock upstream answers at once; the incidents come from the daemon
 * stand-in with exact recorded times.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import { join } from 'node:path';
import { nativeAddon } from '../../core/native/addon';
import { KREPLAY_BIN } from '../support/agent-process';
import { incidentCall, startExecDaemon, type ExecDaemon, type IncidentEvent } from '../support/exec-daemon';
import { runCommand, type Outcome } from '../support/exec/kreplay-run';
import { useTempDir } from '../support/temp-dir';

const MS = 1_000_000;
const BUILD = join(__dirname, '..', 'support', 'exec', 'calls-build.py');
const dir = useTempDir('kreplay-relay-');
const daemonDir = useTempDir('kreplay-relay-daemon-');

const run = (command: string, args: string[]): Promise<Outcome> => runCommand([command, ...args]).done;

/** Node's http.get with `timeout` (ms): prints `response <ns>` or `timeout <ns>` (exit 4). */
const NODE_CLIENT = `
const http = require('node:http');
const [port, timeout] = process.argv.slice(1).map(Number);
const start = process.hrtime.bigint();
const req = http.get({ host: '127.0.0.1', port, path: '/', timeout }, (res) => {
  res.resume();
  res.on('end', () => console.log('response ' + (process.hrtime.bigint() - start)));
});
req.on('timeout', () => {
  console.log('timeout ' + (process.hrtime.bigint() - start));
  process.exitCode = 4;
  req.destroy();
});
req.on('error', () => {});
`;

type Client = 'python' | 'curl' | 'node';
/** The client's command line: a GET to 127.0.0.1:port with a timeout of `seconds`. */
function client(name: Client, port: number, seconds: number): string[] {
  if (name === 'python') return ['python3', BUILD, 'request', String(port), String(seconds)];
  if (name === 'curl')
    return ['curl', '-sS', '-o', '/dev/null', '--max-time', String(seconds), `http://127.0.0.1:${port}/`];
  return [process.execPath, '-e', NODE_CLIENT, String(port), String(seconds * 1000)];
}
/** Whether the client's run timed out: its exit status (curl: 28, the others: 4). */
const timedOut = (name: Client, outcome: Outcome) => outcome.status === (name === 'curl' ? 28 : 4);

describe('kreplay replay --exec: slow upstreams and connects through the relay', () => {
  let upstream: http.Server;
  let port = 0;
  let daemon: ExecDaemon | null = null;
  beforeAll(async () => {
    upstream = http.createServer((_req, res) => res.end('ok\n'));
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    port = (upstream.address() as net.AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => upstream.close(() => resolve())));
  afterEach(async () => {
    await daemon?.close();
    daemon = null;
  });

  /** The incident: a connect, a request sent, and the upstream's answer 3 s later (response_ns). */
  const slowUpstream = (): IncidentEvent[] => {
    const peer = `tcp 10.0.0.5:${port}`;
    return [
      incidentCall('inc', 0, 0.2, 'sys_connect', peer, 'socket', { syscall: 'connect' }),
      incidentCall('inc', 1, 0.05, 'sys_write', peer, 'socket', { syscall: 'sendto', bytes: 60 }),
      {
        ...incidentCall('inc', 1.1, 3000, 'sys_read' as 'sys_write', peer, 'socket', {
          syscall: 'recvfrom',
          bytes: 120,
          ret: 120,
        }),
        response_ns: 3000n * BigInt(MS),
      } as IncidentEvent,
    ];
  };

  async function replay(events: IncidentEvent[], flags: string[], build: string[]): Promise<Outcome> {
    daemon = await startExecDaemon(events, daemonDir.path);
    return run(process.execPath, [
      KREPLAY_BIN,
      'replay',
      'inc',
      '--exec',
      '--server',
      daemon.url,
      ...flags,
      '--',
      ...build,
    ]);
  }

  it.each<Client>(['python', 'curl', 'node'])(
    "%s: times out at 1 s under the incident's 3 s upstream, passes at 5 s, and at 1 s with --speed 10",
    async (name) => {
      const alone = await run(client(name, port, 1)[0]!, client(name, port, 1).slice(1));
      expect(alone.status).toBe(0);

      const report = join(dir.path, 'report.json');
      const short = await replay(slowUpstream(), ['--report-json', report], client(name, port, 1));
      expect(timedOut(name, short)).toBe(true);
      await daemon!.close();
      daemon = null;

      const long = await replay(slowUpstream(), ['--report-json', report], client(name, port, 5));
      expect(long.status).toBe(0);
      const response = JSON.parse(readFileSync(report, 'utf8')).targets.find(
        (r: { call: string }) => r.call === 'response',
      );
      expect(response).toMatchObject({
        target: `tcp 10.0.0.5:${port}`,
        kind: 'socket',
        recorded_calls: 1,
        matched: 1,
      });
      expect(Number(response.observed_p50_ns)).toBeGreaterThanOrEqual(3000 * MS);
      expect(response.failure).toBeNull();
      if (name !== 'curl')
        expect(Number(/^response (\d+)$/m.exec(long.stdout)![1])).toBeGreaterThanOrEqual(3000 * MS);
      await daemon!.close();
      daemon = null;

      const fast = await replay(slowUpstream(), ['--speed', '10'], client(name, port, 1));
      expect(fast.status).toBe(0);
    },
  );

  it('a blocking client sees the response 3 s late in recv, its sends matched to the peer it asked for', async () => {
    const report = join(dir.path, 'report.json');
    const result = await replay(
      slowUpstream(),
      ['--report-json', report],
      ['python3', BUILD, 'request', String(port), '0'],
    );
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('status HTTP/1.1 200 OK');
    expect(Number(/^response (\d+)$/m.exec(result.stdout)![1])).toBeGreaterThanOrEqual(3000 * MS);
    const rows = JSON.parse(readFileSync(report, 'utf8')).targets as {
      call: string;
      target: string;
      matched: number;
    }[];
    // the build's socket is the relay's, but its connect and send are the incident's to the peer
    expect(rows.filter((r) => r.target === `tcp 10.0.0.5:${port}`).map((r) => [r.call, r.matched])).toEqual([
      ['connect', 1],
      ['write', 1],
      ['response', 1],
    ]);
  });

  it('two requests the matcher cannot tell apart (one key), one answered in 1.5 s and one at once: neither held, and the slow one is never exercised', async () => {
    // issue 42: by order, the build's first GET took the slow answer whichever request it was
    const peer = `tcp 10.0.0.5:${port}`;
    const key = nativeAddon().requestKey(Buffer.from('GET / HTTP/1.1\r\nHost: a\r\n\r\n'));
    const exchange = (atMs: number, waitMs: number): IncidentEvent[] => [
      incidentCall('inc', atMs, 0.05, 'sys_write', peer, 'socket', { syscall: 'sendto', bytes: 60 }),
      {
        ...incidentCall('inc', atMs + waitMs, 0.01, 'sys_read' as 'sys_write', peer, 'socket', {
          syscall: 'recvfrom',
          bytes: 120,
          ret: 120,
        }),
        response_ns: BigInt(waitMs * MS),
      } as IncidentEvent,
    ];
    const events = [
      incidentCall('inc', 0, 0.2, 'sys_connect', peer, 'socket', { syscall: 'connect' }),
      ...exchange(1, 1500),
      ...exchange(1510, 2),
    ].map((e) => (e.event_type === 'sys_write' ? { ...e, request_key: key } : e));
    const report = join(dir.path, 'ambiguous.json');
    const url = `http://127.0.0.1:${port}/`;
    const result = await replay(
      events,
      ['--report-json', report],
      ['curl', '-sS', '-o', '/dev/null', '-o', '/dev/null', '-w', '%{time_total}\n', url, url],
    );
    expect(result.status).toBe(220);
    // neither was held
    const times = result.stdout.trim().split('\n').map(Number);
    expect(times).toHaveLength(2);
    for (const seconds of times) expect(seconds).toBeLessThan(1);
    const parsed = JSON.parse(readFileSync(report, 'utf8')) as {
      verdict: string;
      targets: { call: string; matched: number; ambiguous: number; passed_through: number }[];
      causes: { exercised: boolean; reason: string }[];
    };
    expect(parsed.verdict).toBe('not-reproduced');
    expect(parsed.targets.find((r) => r.call === 'response')).toMatchObject({
      matched: 2,
      ambiguous: 2,
      passed_through: 0,
    });
    expect(parsed.causes).toEqual([
      expect.objectContaining({ exercised: false, reason: expect.stringMatching(/^ambiguous: /) as string }),
    ]);
  });

  /** A build that polls its non-blocking connect with a timeout of `seconds`, against an incident whose connect took 1.5 s. */
  async function polledConnect(flags: string[], seconds: number): Promise<Outcome> {
    const events = [
      incidentCall('inc', 0, 1500, 'sys_connect', `tcp 10.0.0.5:${port}`, 'socket', { syscall: 'connect' }),
    ];
    const outcome = await replay(events, flags, [
      'python3',
      BUILD,
      'connect',
      String(port),
      String(seconds),
      'poll',
    ]);
    await daemon!.close();
    daemon = null;
    return outcome;
  }

  it("a non-blocking connect the build polls completes at the incident's 1.5 s: a 1 s timeout fires, 5 s passes", async () => {
    const report = join(dir.path, 'report.json');
    const short = await polledConnect(['--report-json', report], 1);
    expect(short.stdout).toMatch(/^timeout /m);
    expect(short.status).toBe(4);

    const long = await polledConnect(['--report-json', report], 5);
    expect(long.status).toBe(0);
    // within the report's default tolerance (1 ms) of the incident's time, seen by the build itself
    expect(Number(/^connected (\d+)$/m.exec(long.stdout)![1])).toBeGreaterThanOrEqual(1499 * MS);
    const row = JSON.parse(readFileSync(report, 'utf8')).targets.find(
      (r: { call: string }) => r.call === 'connect',
    );
    expect(row).toMatchObject({ matched: 1, failure: null });
    expect(Number(row.observed_p50_ns)).toBeGreaterThanOrEqual(1500 * MS);
  });

  it('--pace timeline: a non-blocking connect the build polls completes at its release on the timeline (1.5 s): a 1 s timeout fires', async () => {
    const short = await polledConnect(['--pace', 'timeline'], 1);
    expect(short.stdout).toMatch(/^timeout /m);
    expect(short.status).toBe(4);

    const long = await polledConnect(['--pace', 'timeline'], 5);
    expect(long.status).toBe(0);
    // the timeline started before the build did: its own wait is 1.5 s less its start-up, never below 1 s here
    expect(Number(/^connected (\d+)$/m.exec(long.stdout)![1])).toBeGreaterThan(1000 * MS);
  });
});
