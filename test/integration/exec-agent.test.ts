/**
 * The whole loop on the real kernel, nothing stood in: the agent records an
 * incident (a build whose pipe reader is slow, so its writes block), the
 * daemon serves it over HTTP, and `kreplay replay --exec` makes the fixed
 * build (fast reader) take the recorded time on each of those writes.
 */
import { execFile, spawn } from 'node:child_process';
import net from 'node:net';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { expectHeld, useWriters, writerRun, writeTimes } from '../support/exec/writer';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const MS = 1_000_000;
const TXN = `incident-${process.pid}`;
const PIPE_WRITES = 6;
const SLOW_READER_MS = 15;

const dir = useTempDir('kreplay-exec-agent-');
const writers = useWriters();
let cgroup: TestCgroup;
let agent: AgentProcess | null = null;
let daemon: Daemon | null = null;

interface RecordedWrite {
  target: string | null;
  target_kind: string | null;
  duration_ns: string;
}

function run(command: string, args: string[]): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (status) => resolve({ status, stderr }));
  });
}

/** The transaction's writes as the daemon serves them (exact JSON: ns as strings). */
async function recordedWrites(url: string): Promise<RecordedWrite[]> {
  const res = await fetch(
    `${url}/api/events?transaction_id=${TXN}&event_type=sys_write&order=asc&limit=1000`,
  );
  expect(res.status).toBe(200);
  return ((await res.json()) as { events: RecordedWrite[] }).events;
}

beforeAll(() => {
  cgroup = createCgroup(`kreplay-exec-agent-${process.pid}.service`);
});

afterAll(async () => {
  await daemon?.close();
  await agent?.stop();
  cgroup?.remove();
});

it('records an incident with the agent and holds the fixed build to its write timing', async () => {
  const data = join(dir.path, 'data');
  const file = join(dir.path, 'app.log');
  const sink = net.createServer((socket) => socket.resume());
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const port = (sink.address() as net.AddressInfo).port;
  // the build's targets, the same in the incident and the fixed build: a file, a pipe, a loopback socket
  const targets = ['--file', file, '2', '--pipe', String(PIPE_WRITES), '--tcp', String(port), '2'];
  try {
    agent = await startAgent(['--data-dir', data, '--node', 'exec-agent', '--cgroup-id', String(cgroup.id)]);
    // the incident: the build (its pipe reader slow) in the traced cgroup, its thread tagged by a
    // marker write (as an instrumented service does) before it execs the build
    await new Promise<void>((resolve, reject) =>
      execFile(
        '/bin/sh',
        [
          '-c',
          `${cgroup.enter} sh -c 'printf "KREPLAY-CTX txn=${TXN}\\n" > /dev/null; exec "$@"' sh "$@"`,
          'sh',
          writers.dynamic,
          ...targets,
          '--slow-reader-ms',
          String(SLOW_READER_MS),
        ],
        { timeout: 60_000 },
        (err, _stdout, stderr) =>
          err ? reject(new Error(`incident run failed: ${err.message}\n${stderr}`)) : resolve(),
      ),
    );
    daemon = await createDaemon({ dataDir: data, log: silentLogger });
    const url = daemon.url;
    const writes = await waitFor(async () => {
      const rows = await recordedWrites(url);
      return rows.filter((w) => w.target === `tcp 127.0.0.1:${port}`).length === 2 ? rows : undefined;
    });
    expect(await agent.stop()).toBe(0);
    agent = null;

    const recorded = (target: string) =>
      writes.filter((w) => w.target === target).map((w) => Number(w.duration_ns));
    const pipeNs = recorded('pipe');
    expect(pipeNs).toHaveLength(PIPE_WRITES);
    expect(recorded(file)).toHaveLength(2);
    // the first 4 KiB block fits the pipe; every later one waited for the slow reader
    expect(pipeNs.slice(1).every((ns) => ns >= (SLOW_READER_MS / 2) * MS)).toBe(true);

    // the fixed build, alone: its pipe writes are quick (the median against the incident's:
    // one call may wait for a core on this shared machine)
    const alone = join(dir.path, 'alone.times');
    expect((await run(writers.dynamic, [...targets, '--out', alone])).status).toBe(0);
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    expect(median(writeTimes(alone).pipe!)).toBeLessThan(median(pipeNs) / 4);

    // under replay: each write takes its recorded duration / speed + extra latency, never less,
    // late by no more than the machine wakes a sleeping thread (the build's own anchor sleeps)
    for (const [speed, extraNs] of [
      [1, 0],
      [10, 2 * MS],
    ] as const) {
      const held = join(dir.path, `held-${speed}.times`);
      const replay = await run(process.execPath, [
        KREPLAY_BIN,
        'replay',
        TXN,
        '--exec',
        '--server',
        url,
        '--speed',
        String(speed),
        '--extra-latency-ns',
        String(extraNs),
        '--',
        writers.dynamic,
        ...targets,
        '--out',
        held,
        '--realtime',
        '--anchor',
        '10',
      ]);
      expect(replay.status).toBe(0);
      const writes = writerRun(held);
      const intended = (ns: number[]) => ns.map((d) => Math.round(d / speed) + extraNs);
      expectHeld(writes, 'pipe', intended(pipeNs));
      expectHeld(writes, 'file', intended(recorded(file)));
      expectHeld(writes, 'tcp', intended(recorded(`tcp 127.0.0.1:${port}`)));
    }
  } finally {
    sink.close();
  }
});
