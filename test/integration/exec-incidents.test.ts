/**
 * `kreplay replay --exec` of incidents recorded for real by the agent, every
 * slowness made real: an upstream that answers in 3 s, an fdatasync that
 * stalls 1.2 s and one that fails with EIO, a receiver that stops reading for 1.2 s, (a FUSE filesystem whose fsync
 * sleeps or fails: test/support/exec/slow-fsync-fs.py), and a connect whose
 * first SYNs a full accept queue drops. Each is then replayed against a fixed
 * world (an upstream that answers at once, a plain directory, a listener
 * that accepts) and the build's own timeouts and logs show the incident.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { runCommand, saidOnFailure, type Outcome } from '../support/exec/kreplay-run';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const MS = 1_000_000;
const BUILD = join(__dirname, '..', 'support', 'exec', 'calls-build.py');
const FUSE_FS = join(__dirname, '..', 'support', 'exec', 'slow-fsync-fs.py');
const dir = useTempDir('kreplay-incidents-');

const run = (argv: string[]): Promise<Outcome> => runCommand(argv).done;

interface Recorded {
  event_type: string;
  syscall: string;
  bytes: number | null;
  target: string | null;
  duration_ns: string;
  ret: number;
  response_ns?: string | null;
}

let cgroup: TestCgroup;
let agent: AgentProcess | null = null;
let daemon: Daemon | null = null;
let data = '';
const servers: net.Server[] = [];
const children: ChildProcess[] = [];
const mounts: string[] = [];

async function serve(delayMs: number): Promise<number> {
  const server = http.createServer((_req, res) => setTimeout(() => res.end('ok\n'), delayMs));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return (server.address() as net.AddressInfo).port;
}

/** A TCP receiver that reads nothing for `pauseMs` after a connection comes, then all: a slow consumer. */
async function receiver(pauseMs: number): Promise<number> {
  const server = net.createServer((socket) => {
    socket.pause();
    setTimeout(() => socket.resume(), pauseMs);
    socket.on('data', () => undefined).on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return (server.address() as net.AddressInfo).port;
}

/** CMD run by `kreplay run --txn TXN` in the traced cgroup, as a tagged service runs. */
function record(txn: string, argv: string[]): Promise<Outcome> {
  return new Promise((resolve) =>
    execFile(
      '/bin/sh',
      ['-c', `${cgroup.enter} "$@"`, 'sh', process.execPath, KREPLAY_BIN, 'run', '--txn', txn, '--', ...argv],
      { timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({
          status: err ? ((err.code as number) ?? 1) : 0,
          signal: err?.signal ?? null,
          stdout,
          stderr,
        }),
    ),
  );
}

/** The transaction's events of `type`, once `count` are in the store. */
/** The transaction's events of a type, once there are `count` of them, or once `enough` says so. */
async function recorded(
  txn: string,
  type: string,
  count: number,
  enough: (events: Recorded[]) => boolean = () => true,
): Promise<Recorded[]> {
  return waitFor(async () => {
    const res = await fetch(
      `${daemon!.url}/api/events?transaction_id=${txn}&event_type=${type}&int64=string&limit=1000`,
    );
    const events = ((await res.json()) as { events: Recorded[] }).events;
    return events.length >= count && enough(events) ? events : undefined;
  }, 20_000);
}

const replay = (txn: string, flags: string[], build: string[]) =>
  run([
    process.execPath,
    KREPLAY_BIN,
    'replay',
    txn,
    '--exec',
    '--server',
    daemon!.url,
    ...flags,
    '--',
    ...build,
  ]);

/** A FUSE filesystem over a fresh directory whose fsync is `mode` (stall:MS or eio); its mount point. */
async function fuseMount(mode: string): Promise<string> {
  const backing = join(dir.path, `backing-${mounts.length}`);
  const mountPoint = join(dir.path, `mnt-${mounts.length}`);
  mkdirSync(backing);
  mkdirSync(mountPoint);
  children.push(spawn('/usr/bin/python3', [FUSE_FS, backing, mountPoint, mode], { stdio: 'ignore' }));
  mounts.push(mountPoint);
  await waitFor(() => (readFileSync('/proc/self/mounts', 'utf8').includes(mountPoint) ? true : undefined));
  return mountPoint;
}

beforeAll(async () => {
  cgroup = createCgroup(`kreplay-exec-incidents-${process.pid}.service`);
});

beforeEach(async () => {
  data = join(dir.path, 'data');
  agent = await startAgent(['--data-dir', data, '--node', 'incidents', '--cgroup-id', String(cgroup.id)]);
  daemon = await createDaemon({ dataDir: data, log: silentLogger });
});

afterEach(async () => {
  for (const mountPoint of mounts.splice(0)) await run(['umount', '-l', mountPoint]);
  for (const child of children.splice(0)) child.kill('SIGKILL');
  for (const server of servers.splice(0)) server.close();
  await daemon?.close();
  await agent?.stop();
  daemon = null;
  agent = null;
});

afterAll(() => cgroup?.remove());

type Client = 'python' | 'curl' | 'node';
const NODE_CLIENT = `
const http = require('node:http');
const [port, timeout] = process.argv.slice(1).map(Number);
const req = http.get({ host: '127.0.0.1', port, path: '/', timeout }, (res) => res.resume());
req.on('timeout', () => { process.exitCode = 4; req.destroy(); });
req.on('error', () => {});
`;
function client(name: Client, port: number, seconds: number): string[] {
  if (name === 'python') return ['python3', BUILD, 'request', String(port), String(seconds)];
  if (name === 'curl')
    return ['curl', '-sS', '-o', '/dev/null', '--max-time', String(seconds), `http://127.0.0.1:${port}/`];
  return [process.execPath, '-e', NODE_CLIENT, String(port), String(seconds * 1000)];
}
const timedOut = (name: Client, outcome: Outcome) => outcome.status === (name === 'curl' ? 28 : 4);
/** A replay's status, and what it said when it did not pass (its verdict and reasons). */
const passed = (outcome: Outcome) => ({ status: outcome.status, said: saidOnFailure(outcome) });
const PASSED = { status: 0, said: [] };

it('an upstream that answered in 3 s: three clients time out at 1 s; a 5 s timeout passes, and 1 s with --speed 10', async () => {
  const slow = await serve(3000);
  const fast = await serve(0);
  expect((await record('slow-upstream', client('python', slow, 10))).status).toBe(0);
  const [read] = await waitFor(async () => {
    const reads = (await recorded('slow-upstream', 'sys_read', 1)).filter(
      (e) => e.target === `tcp 127.0.0.1:${slow}` && e.response_ns,
    );
    return reads.length > 0 ? reads : undefined;
  });
  expect(Number(read!.response_ns)).toBeGreaterThanOrEqual(3000 * MS);
  const map = ['--map', `127.0.0.1:${slow}=127.0.0.1:${fast}`];
  for (const name of ['python', 'curl', 'node'] as Client[])
    expect(timedOut(name, await replay('slow-upstream', map, client(name, fast, 1)))).toBe(true);
  // the 5 s and --speed 10 variants of every client run on the stand-in incident (exec-relay.test.ts)
  expect(passed(await replay('slow-upstream', map, client('python', fast, 5)))).toEqual(PASSED);
  expect(passed(await replay('slow-upstream', [...map, '--speed', '10'], client('python', fast, 1)))).toEqual(
    PASSED,
  );
});

it('an fdatasync that stalled 1.2 s: the writer logs "slow fdatasync" under replay, not without', async () => {
  const stalled = await fuseMount('stall:1200');
  const recordedRun = await record('fsync-stall', [
    'python3',
    BUILD,
    'fsync',
    join(stalled, 'wal'),
    '2',
    '1000',
  ]);
  expect(recordedRun.stdout.match(/slow fdatasync/g)).toHaveLength(2);
  const syncs = await recorded('fsync-stall', 'sys_fsync', 2);
  expect(syncs.map((e) => [e.syscall, e.target])).toEqual([
    ['fdatasync', join(stalled, 'wal')],
    ['fdatasync', join(stalled, 'wal')],
  ]);
  const fixed = join(dir.path, 'fixed');
  mkdirSync(fixed);
  const build = ['python3', BUILD, 'fsync', join(fixed, 'wal'), '2', '1000'];
  expect((await run(build)).stdout).not.toContain('slow fdatasync');
  const replayed = await replay('fsync-stall', ['--map', `${stalled}=${fixed}`], build);
  expect(passed(replayed)).toEqual(PASSED);
  expect(replayed.stdout.match(/slow fdatasync/g)).toHaveLength(2);
});

it('an fdatasync that failed with EIO fails with EIO under --replay-errors, and the build takes its error path', async () => {
  const failing = await fuseMount('eio');
  const recordedRun = await record('fsync-eio', [
    'python3',
    BUILD,
    'fsync',
    join(failing, 'wal'),
    '2',
    '1000',
  ]);
  expect(recordedRun.stdout).toContain('fdatasync failed: EIO');
  const [sync] = await recorded('fsync-eio', 'sys_fsync', 1);
  expect(sync!.ret).toBe(-5);
  const fixed = join(dir.path, 'fixed');
  mkdirSync(fixed);
  const build = ['python3', BUILD, 'fsync', join(fixed, 'wal'), '2', '1000'];
  expect(passed(await replay('fsync-eio', ['--map', `${failing}=${fixed}`], build))).toEqual(PASSED);
  const failed = await replay('fsync-eio', ['--map', `${failing}=${fixed}`, '--replay-errors'], build);
  expect(failed.stdout).toContain('fdatasync failed: EIO');
  expect(failed.status).toBe(3);
});

it('a connect whose SYNs a full accept queue dropped (≥ 1.5 s): a 1 s connect timeout fires, blocking and polled', async () => {
  const backlog = spawn('python3', [BUILD, 'backlog'], { stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(backlog);
  const port = await new Promise<number>((resolve) =>
    backlog.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim()))),
  );
  expect(
    (await record('slow-connect', ['python3', BUILD, 'connect', String(port), '10', 'blocking'])).status,
  ).toBe(0);
  /* by its peer: glibc may first try nscd's socket (a failed unix connect) where it looks a user up */
  const peer = (c: Recorded) => c.target === `tcp 127.0.0.1:${port}`;
  const connect = (await recorded('slow-connect', 'sys_connect', 1, (all) => all.some(peer))).find(peer);
  expect(Number(connect!.duration_ns)).toBeGreaterThanOrEqual(1500 * MS);
  const accepting = await serve(0);
  const map = ['--map', `127.0.0.1:${port}=127.0.0.1:${accepting}`];
  for (const mode of ['blocking', 'poll']) {
    expect((await run(['python3', BUILD, 'connect', String(accepting), '1', mode])).status).toBe(0);
    const replayed = await replay('slow-connect', map, [
      'python3',
      BUILD,
      'connect',
      String(accepting),
      '1',
      mode,
    ]);
    expect(replayed.stdout).toMatch(/^timeout /m);
    expect(replayed.status).toBe(4);
  }
});

it('a sender whose receiver stopped reading for 1.2 s (sendall blocked on a full window): the same sends to a prompt receiver take as long under replay', async () => {
  const slow = await receiver(1200);
  const fast = await receiver(0);
  const [total, chunk] = [16 << 20, 64 << 10];
  const build = (port: number) => ['python3', BUILD, 'send', String(port), String(total), String(chunk)];
  const sentNs = (outcome: Outcome) => Number(/^sent (\d+)$/m.exec(outcome.stdout)?.[1]);
  const recordedRun = await record('slow-consumer', build(slow));
  expect(recordedRun.status).toBe(0);
  // the receiver's timer and the sender's clock start apart: a real stall, not its exact length
  expect(sentNs(recordedRun)).toBeGreaterThanOrEqual(1000 * MS);
  const peer = (e: Recorded) => e.target === `tcp 127.0.0.1:${slow}`;
  const bytes = (events: Recorded[]) => events.filter(peer).reduce((sum, e) => sum + Number(e.bytes), 0);
  const sends = (await recorded('slow-consumer', 'sys_write', 1, (all) => bytes(all) >= total)).filter(peer);
  // python's sendall: send(2), recorded as sys_write by its syscall
  expect(new Set(sends.map((e) => e.syscall))).toEqual(new Set(['sendto']));
  const recordedNs = sends.reduce((sum, e) => sum + Number(e.duration_ns), 0);
  expect(recordedNs).toBeGreaterThanOrEqual(1000 * MS);
  // to a prompt receiver the same bytes go at once, and under replay take the incident's time
  const direct = await run(build(fast));
  expect(direct.status).toBe(0);
  expect(sentNs(direct)).toBeLessThan(recordedNs / 4);
  const replayed = await replay(
    'slow-consumer',
    ['--map', `127.0.0.1:${slow}=127.0.0.1:${fast}`],
    build(fast),
  );
  expect(passed(replayed)).toEqual(PASSED);
  expect(sentNs(replayed)).toBeGreaterThanOrEqual(recordedNs * 0.95);
});
