/**
 * Issue 23 end to end on the real kernel: the agent records an incident
 * (`kreplay run --txn`, a build whose pipe reader is slow), the daemon serves
 * it, `kreplay replay --exec` holds the fixed build to it, and `kreplay
 * export --format incident` writes it to a file. Then agent and daemon stop
 * and the data dir goes: the file alone, replayed as uid 65534 without
 * capabilities, holds the build as the replay from the daemon did, at speed
 * 1 and 10.
 */
import { execFile } from 'node:child_process';
import { chmodSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { dirname, join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import { kreplay, UNPRIVILEGED } from '../support/exec/kreplay-run';
import { useWriters, writeTimes } from '../support/exec/writer';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const MS = 1_000_000;
const TXN = `incident-e2e-${process.pid}`;
const PIPE_WRITES = 6;

const dir = useTempDir('kreplay-incident-e2e-');
const writers = useWriters();
let cgroup: TestCgroup;
let agent: AgentProcess | null = null;
let daemon: Daemon | null = null;

beforeAll(() => {
  cgroup = createCgroup(`kreplay-incident-e2e-${process.pid}.service`);
  chmodSync(dirname(writers.dynamic), 0o755);
});

afterAll(async () => {
  await daemon?.close();
  await agent?.stop();
  cgroup?.remove();
});

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

function sh(script: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile('/bin/sh', ['-c', script, 'sh', ...args], { timeout: 60_000 }, (err, _out, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(),
    ),
  );
}

it('replays an exported incident file with nothing else running, as the daemon did', async () => {
  chmodSync(dir.path, 0o777);
  const data = join(dir.path, 'data');
  const file = join(dir.path, 'app.log');
  const incidentFile = join(dir.path, 'incident.kri');
  const sink = net.createServer((socket) => socket.resume());
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  const port = (sink.address() as net.AddressInfo).port;
  const targets = ['--file', file, '2', '--pipe', String(PIPE_WRITES), '--tcp', String(port), '2'];
  try {
    agent = await startAgent(['--data-dir', data, '--node', 'e2e', '--cgroup-id', String(cgroup.id)]);
    // the incident, tagged as a user tags one: kreplay run --txn, in the traced cgroup
    await sh(`${cgroup.enter} "$@"`, [
      process.execPath,
      KREPLAY_BIN,
      'run',
      '--txn',
      TXN,
      '--',
      writers.dynamic,
      ...targets,
      '--slow-reader-ms',
      '15',
    ]);
    daemon = await createDaemon({ dataDir: data, log: silentLogger });
    const url = daemon.url;
    await waitFor(async () => {
      const res = await fetch(`${url}/api/events?transaction_id=${TXN}&event_type=sys_write&limit=1000`);
      const rows = ((await res.json()) as { events: { target: string | null }[] }).events;
      return rows.filter((w) => w.target === `tcp 127.0.0.1:${port}`).length === 2 ? true : undefined;
    });

    // the replay from the daemon: the reference
    const fromDaemon: Record<number, Record<string, number[]>> = {};
    for (const speed of [1, 10]) {
      const out = join(dir.path, `daemon-${speed}.times`);
      const result = await kreplay(
        [
          'replay',
          TXN,
          '--exec',
          '--server',
          url,
          '--speed',
          String(speed),
          '--report-json',
          `${out}.json`,
          '--',
          writers.dynamic,
          ...targets,
          '--out',
          out,
        ],
        [],
      ).done;
      expect(result.status).toBe(0);
      fromDaemon[speed] = writeTimes(out);
    }

    // export, then nothing is left but the file
    const exported = await kreplay([
      'export',
      TXN,
      '--format',
      'incident',
      '-o',
      incidentFile,
      '--server',
      url,
    ]).done;
    expect(exported.status).toBe(0);
    chmodSync(incidentFile, 0o644);
    await daemon.close();
    daemon = null;
    expect(await agent.stop()).toBe(0);
    agent = null;
    rmSync(data, { recursive: true, force: true });
    // the fixed build runs as the unprivileged user: the log it appends to is its own
    rmSync(file, { force: true });

    for (const speed of [1, 10]) {
      const out = join(dir.path, `file-${speed}.times`);
      const report = join(dir.path, `file-${speed}.json`);
      const result = await kreplay(
        [
          'replay',
          '--incident',
          incidentFile,
          '--exec',
          '--speed',
          String(speed),
          '--report-json',
          report,
          '--',
          writers.dynamic,
          ...targets,
          '--out',
          out,
        ],
        UNPRIVILEGED,
      ).done;
      expect(result.stderr).not.toMatch(/cannot reach|session/);
      expect(result.status).toBe(0);
      const times = writeTimes(out);
      interface Row {
        call: string;
        target: string;
        recorded_calls: number;
        matched: number;
        held: boolean;
        intended_p50_ns: number | null;
        intended_p99_ns: number | null;
      }
      const rows = (path: string) =>
        (JSON.parse(readFileSync(path, 'utf8')) as { targets: Row[] }).targets
          .filter((r) => r.recorded_calls > 0)
          .map((r) => [
            r.call,
            r.target,
            r.recorded_calls,
            r.matched,
            r.held,
            r.intended_p50_ns,
            r.intended_p99_ns,
          ]);
      // the same plan, the same holds intended, every recorded call matched, as from the daemon
      // (the marker that tagged the incident never held, in both)
      expect(rows(report)).toEqual(rows(`${join(dir.path, `daemon-${speed}.times`)}.json`));
      expect(rows(report)).toContainEqual(['write', '/dev/null', 1, 0, false, null, null]);
      expect(rows(report)).toContainEqual(
        expect.arrayContaining(['write', 'pipe', PIPE_WRITES, PIPE_WRITES, true]),
      );
      // and held as long: the pipe's writes (the holds of milliseconds; the others' are of
      // microseconds, timing noise) at the median within the default tolerance (10% or 1 ms)
      // plus a scheduler slice (the unprivileged supervisor has no real-time priority)
      const [mine, theirs] = [median(times.pipe!), median(fromDaemon[speed]!.pipe!)];
      expect(Math.abs(mine - theirs)).toBeLessThanOrEqual(Math.max(theirs * 0.1, 1 * MS) + 2 * MS);
      expect(median(times.pipe!)).toBeGreaterThanOrEqual((15 / 2 / speed) * MS);
    }
  } finally {
    sink.close();
  }
});
