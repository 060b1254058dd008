/**
 * `kreplay replay --exec` against a real build under the real kernel: seccomp
 * supervision, holds, pass-through, exit status, process hygiene and session
 * controls. The incident comes from a daemon stand-in with exact recorded
 * durations (test/support/exec-daemon.ts); exec-agent.test.ts records one
 * with the agent.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { incidentWrite, startExecDaemon, type ExecDaemon, type IncidentEvent } from '../support/exec-daemon';
import { kreplay, tcpSink, type Run } from '../support/exec/kreplay-run';
import {
  beyondHost,
  expectHeld,
  expectHeldAtMedian,
  expectWithin,
  useWriters,
  writerRun,
  writeTimes,
} from '../support/exec/writer';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';

const MS = 1_000_000;
const dir = useTempDir('kreplay-exec-');
const writers = useWriters();
const daemonDir = useTempDir('kreplay-exec-daemon-');

/** `kreplay replay inc --exec --server URL ARGS…` (ARGS: flags, then -- and the build). */
const replayInc = (url: string, args: string[]): Run =>
  kreplay(['replay', 'inc', '--exec', '--server', url, ...args]);

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
};

describe('kreplay replay --exec', () => {
  let daemon: ExecDaemon | null = null;
  let sink: { port: number; close(): void } | null = null;
  afterEach(async () => {
    sink?.close();
    await daemon?.close();
    daemon = sink = null;
  });

  async function incident(events: IncidentEvent[]): Promise<ExecDaemon> {
    daemon = await startExecDaemon(events, daemonDir.path);
    return daemon;
  }

  it.each([
    ['speed 1', 1, 0],
    ['speed 10 with 2 ms extra latency', 10, 2 * MS],
  ])(
    'holds each matched write to a file, a pipe and a socket as recorded (%s); the rest pass through',
    async (_name, speed, extraNs) => {
      sink = await tcpSink();
      const app = join(dir.path, 'app');
      mkdirSync(app);
      // five recorded writes per target: each target's median hold is a median, which a single
      // call that waited for a core on this shared machine cannot move
      const recorded = {
        file: { target: '/var/lib/app/wal.log', kind: 'file', ms: [20, 5, 12, 9, 14] },
        pipe: { target: 'pipe', kind: 'pipe', ms: [15, 8, 11, 6, 10] },
        // recorded against production's address: the build's loopback peer matches on the port
        tcp: { target: `tcp 10.0.0.5:${sink.port}`, kind: 'socket', ms: [10, 7, 13, 9, 6] },
      } as const;
      let at = 0;
      const d = await incident(
        Object.values(recorded).flatMap(({ target, kind, ms }) =>
          ms.map((duration) => incidentWrite('inc', (at += 25), duration, target, kind)),
        ),
      );
      const out = join(dir.path, 'times');
      const report = join(dir.path, 'report.json');
      const run = replayInc(d.url, [
        '--speed',
        String(speed),
        '--extra-latency-ns',
        String(extraNs),
        '--map',
        `/var/lib/app=${app}`,
        '--report-json',
        report,
        '--report',
        join(dir.path, 'report.xml'),
        '--',
        writers.dynamic,
        '--out',
        out,
        '--realtime',
        '--anchor',
        '10',
        '--file',
        join(app, 'wal.log'),
        '6',
        '--pipe',
        '6',
        '--tcp',
        String(sink.port),
        '6',
        '--devnull',
        '3',
      ]);
      const result = await run.done;
      expect(result.stderr).toMatch(/\| TARGET +\| KIND/);
      expect(result).toMatchObject({ status: 0 });
      const hold = (ms: number) => Math.round((ms * MS) / speed) + extraNs;
      const writes = writerRun(out);
      for (const [label, { ms }] of Object.entries(recorded)) expectHeld(writes, label, ms.map(hold));
      // past the recorded count, and targets the incident never wrote, pass at once: far below any hold
      // (the median, less what the host made the build wait for a core meanwhile)
      const passed = [
        ...['file', 'pipe', 'tcp'].map((label) => beyondHost(writes, label, 5)),
        ...writes.times.devnull!.map((_, k) => beyondHost(writes, 'devnull', k)),
      ].sort((a, b) => a - b);
      expectWithin(
        'passed-through median',
        passed[Math.floor(passed.length / 2)]!,
        hold(5) / 5,
        writes,
        'devnull',
      );

      const json = JSON.parse(readFileSync(report, 'utf8'));
      expect(json).toMatchObject({ transaction_id: 'inc', exit_status: 0, speed_factor: speed });
      const rows = Object.fromEntries(json.targets.map((t: { target: string }) => [t.target, t]));
      expect(rows[join(app, 'wal.log')]).toMatchObject({
        kind: 'file',
        recorded_calls: 5,
        matched: 5,
        passed_through: 1,
        failure: null,
      });
      expect(rows.pipe).toMatchObject({ recorded_calls: 5, matched: 5, passed_through: 1, failure: null });
      expect(rows[`tcp 10.0.0.5:${sink.port}`]).toMatchObject({
        kind: 'socket',
        matched: 5,
        passed_through: 1,
      });
      expect(rows['/dev/null']).toMatchObject({
        kind: 'char',
        recorded_calls: 0,
        matched: 0,
        passed_through: 3,
      });
      expect(rows[join(app, 'wal.log')].recorded_p99_ns).toBe(20 * MS);
      // the JUnit report says what the JSON says: a hold off at its median is a timing failure (the
      // socket's may be, on a loaded host: the build waits for a core after its release, which
      // expectHeld above allows for), and nothing else fails
      const xml = readFileSync(join(dir.path, 'report.xml'), 'utf8');
      const timing = json.targets.filter((t: { failure: string | null }) => t.failure !== null).length;
      expect(xml).toMatch(
        new RegExp(`<testsuites name="kreplay replay --exec" tests="\\d+" failures="${timing}">`),
      );
      expect([...xml.matchAll(/<failure [^>]*type="([^"]+)"/g)].map((m) => m[1])).toEqual(
        Array<string>(timing).fill('timing'),
      );

      const [session] = d.sessions.list().map((s) => s.record());
      expect(session!.driving).toEqual({
        command: expect.stringContaining(writers.dynamic),
        pid: expect.any(Number),
      });
      expect(['finished', 'stopped']).toContain(session!.state);
    },
  );

  it("matches a server's writes on an accepted unix socket by the path it listens on, as the agent names it", async () => {
    const socketPath = join(dir.path, 'app.sock');
    const d = await incident([
      incidentWrite('inc', 0, 12, `unix ${socketPath}`, 'socket'),
      incidentWrite('inc', 20, 6, `unix ${socketPath}`, 'socket'),
    ]);
    const out = join(dir.path, 'unix-times');
    const run = replayInc(d.url, [
      '--',
      writers.dynamic,
      '--out',
      out,
      '--realtime',
      '--anchor',
      '10',
      '--unix-serve',
      socketPath,
      '3',
    ]);
    await waitFor(() => existsSync(socketPath));
    const client = net.connect(socketPath);
    client.resume();
    const result = await run.done;
    client.destroy();
    expect(result.status).toBe(0);
    const writes = writerRun(out);
    expectHeld(writes, 'unix', [12 * MS, 6 * MS]);
    // the third was never recorded: it passes at once, far below the last hold
    expect(writes.times.unix![2]).toBeLessThan(6 * MS + 2 * Math.max(...writes.times.anchor!));
  });

  it('holds without CAP_SYS_NICE: the supervisor stays under normal scheduling instead of failing', async () => {
    const file = join(dir.path, 'no-nice.log');
    const d = await incident([
      incidentWrite('inc', 0, 8, file, 'file'),
      incidentWrite('inc', 10, 4, file, 'file'),
    ]);
    const out = join(dir.path, 'no-nice-times');
    const result = await kreplay(
      [
        'replay',
        'inc',
        '--exec',
        '--server',
        d.url,
        '--',
        writers.dynamic,
        '--out',
        out,
        '--anchor',
        '10',
        '--file',
        file,
        '2',
      ],
      ['setpriv', '--bounding-set=-sys_nice', '--inh-caps=-sys_nice', '--'],
    ).done;
    expect(result).toMatchObject({ status: 0 });
    // without real-time priority a single call may wait a scheduler slice: held at the median
    expectHeldAtMedian(writerRun(out), 'file', [8 * MS, 4 * MS]);
  });

  it('propagates exit status 3 and death by a signal (128 + N), report written', async () => {
    const d = await incident([incidentWrite('inc', 0, 1, '/nowhere', 'file')]);
    const three = await replayInc(d.url, ['--', writers.dynamic, '--exit', '3']).done;
    expect(three.status).toBe(3);
    const report = join(dir.path, 'r.xml');
    const killed = await replayInc(d.url, ['--report', report, '--', writers.dynamic, '--signal', '15']).done;
    expect(killed.status).toBe(128 + 15);
    expect(killed.stderr).toMatch(/killed by SIGTERM/);
    expect(readFileSync(report, 'utf8')).toContain('<property name="exit_status" value="143"/>');
  });

  it('intercepts every thread and a forked child of a static binary, writev included', async () => {
    const file = join(dir.path, 'shared.log');
    // 3 threads × 2 writes, then a forked child's 2: 8 calls, each held 10 ms
    const d = await incident(
      Array.from({ length: 8 }, (_, i) => incidentWrite('inc', i * 20, 10, file, 'file')),
    );
    const out = join(dir.path, 'times');
    const result = await replayInc(d.url, [
      '--',
      writers.static,
      '--out',
      out,
      '--file',
      file,
      '2',
      '--threads',
      '3',
      '--fork',
      '--writev',
    ]).done;
    expect(result.status).toBe(0);
    const times = writeTimes(out);
    expect(times.thread).toHaveLength(6);
    expect(times.child).toHaveLength(2);
    for (const ns of [...times.thread!, ...times.child!]) expect(ns).toBeGreaterThanOrEqual(10 * MS);
  });

  it('fails a JUnit testcase where observed and intended differ beyond --tolerance', async () => {
    const file = join(dir.path, 'x.log');
    const d = await incident([incidentWrite('inc', 0, 5, file, 'file')]);
    const report = join(dir.path, 'r.xml');
    const result = await replayInc(d.url, [
      '--tolerance',
      '0ns',
      '--report',
      report,
      '--',
      writers.dynamic,
      '--file',
      file,
      '1',
    ]).done;
    expect(result.status).toBe(0);
    const xml = readFileSync(report, 'utf8');
    expect(xml).toMatch(/<testsuites [^>]*failures="1">/);
    expect(xml).toMatch(/<failure message="p50: observed [^"]* vs intended 5\.000 ms/);
  });

  it('timeline pace: pause over HTTP stops the build, play resumes it, stop releases the rest', async () => {
    const file = join(dir.path, 'steps.log');
    // 100 writes, one every 20 ms, each 1 ms long
    const d = await incident(
      Array.from({ length: 100 }, (_, i) => incidentWrite('inc', i * 20, 1, file, 'file')),
    );
    const run = kreplay([
      'replay',
      'inc',
      '--exec',
      '--pace',
      'timeline',
      '--server',
      d.url,
      '--',
      writers.dynamic,
      '--file',
      file,
      '100',
    ]);
    const lines = () => (existsSync(file) ? readFileSync(file, 'utf8').length / 5 : 0);
    await waitFor(() => lines() >= 10);
    const [session] = d.sessions.list();
    const control = (what: string) =>
      fetch(`${d.url}/api/replay/sessions/${session!.id}/${what}`, { method: 'POST' });
    expect((await control('pause')).status).toBe(200);
    // the pause reaches the build through kreplay's stream of the session: paused once no write
    // came for 100 ms (five of the incident's intervals)
    let last = -1;
    const paused = await waitFor(
      () => {
        const now = lines();
        const still = now === last;
        last = now;
        return still ? now : undefined;
      },
      { everyMs: 100, what: 'the build to pause' },
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    // 300 ms paused: at the incident's pace 15 writes would have gone
    expect(lines()).toBe(paused);
    expect(paused).toBeLessThan(60);
    expect((await control('play')).status).toBe(200);
    await waitFor(() => lines() >= paused + 5);
    expect((await control('stop')).status).toBe(200);
    const result = await run.done;
    expect(result.status).toBe(0);
    expect(lines()).toBe(100);
    expect(result.stderr).toMatch(/passed untouched after the session stopped/);
  });

  it('Ctrl-C: stops the session, SIGTERMs the build, exits 130 leaving no process', async () => {
    const file = join(dir.path, 'held.log');
    const d = await incident([
      incidentWrite('inc', 0, 60_000, file, 'file'),
      incidentWrite('inc', 60_000, 1, file, 'file'),
    ]);
    const report = join(dir.path, 'r.json');
    const run = replayInc(d.url, ['--report-json', report, '--', writers.dynamic, '--file', file, '2']);
    await waitFor(() => d.sessions.list()[0]?.state === 'playing');
    const pid = d.sessions.list()[0]!.driving!.pid;
    // interrupted while its first write is held (the build waits in write(2), syscall 1)
    await waitFor(() => readFileSync(`/proc/${pid}/syscall`, 'utf8').startsWith('1 '), {
      what: "the build's first write held",
    });
    run.child.kill('SIGINT');
    const result = await run.done;
    expect(result.status).toBe(130);
    expect(alive(pid)).toBe(false);
    expect(d.sessions.list()[0]!.state).toBe('stopped');
    expect(JSON.parse(readFileSync(report, 'utf8')).targets[0]).toMatchObject({ matched: 1, cut_short: 1 });
  });

  it('kill -9 of kreplay: the build and its forked child die with it, the daemon stops the session', async () => {
    const file = join(dir.path, 'held.log');
    // the parent's 2 writes pass quickly; its forked child's first write is held for a minute
    const d = await incident([
      incidentWrite('inc', 0, 1, file, 'file'),
      incidentWrite('inc', 10, 1, file, 'file'),
      incidentWrite('inc', 60_000, 60_000, file, 'file'),
    ]);
    const run = replayInc(d.url, ['--', writers.dynamic, '--file', file, '2', '--fork']);
    await waitFor(() => d.sessions.list()[0]?.state === 'playing');
    const pid = d.sessions.list()[0]!.driving!.pid;
    const children = () => readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    await waitFor(() => children() !== '');
    const child = Number(children());
    run.child.kill('SIGKILL');
    await run.done;
    await waitFor(() => !alive(pid) && !alive(child), 3000);
    await waitFor(() => d.sessions.list()[0]!.state === 'stopped', 3000);
    expect([alive(pid), alive(child)]).toEqual([false, false]);
    expect(d.sessions.list()[0]!.state).toBe('stopped');
  });

  it('a build that ends before the incident does: its status, the session stopped, the calls it made counted', async () => {
    const file = join(dir.path, 'early.log');
    const d = await incident(
      Array.from({ length: 10 }, (_, i) => incidentWrite('inc', i * 1000, 2, file, 'file')),
    );
    const report = join(dir.path, 'r.json');
    const result = await replayInc(d.url, [
      '--report-json',
      report,
      '--',
      writers.dynamic,
      '--file',
      file,
      '2',
      '--exit',
      '4',
    ]).done;
    expect(result.status).toBe(4);
    expect(d.sessions.list()[0]!.state).toBe('stopped');
    expect(JSON.parse(readFileSync(report, 'utf8')).targets[0]).toMatchObject({
      recorded_calls: 10,
      matched: 2,
      passed_through: 0,
    });
  });

  it('exits 1 without starting anything for a command that does not exist or an unknown transaction', async () => {
    const d = await incident([incidentWrite('inc', 0, 1, '/x', 'file')]);
    const missing = await kreplay(['replay', 'inc', '--exec', '--server', d.url, '--', 'no-such-build-xyz'])
      .done;
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/cannot run no-such-build-xyz: not found on PATH/);
    const unknown = await kreplay(['replay', 'nope', '--exec', '--server', d.url, '--', writers.dynamic])
      .done;
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/no events with transaction_id "nope"/);
    expect(d.sessions.list()).toHaveLength(0);
  });

  it.each([
    [['replay', 'inc', '--exec'], /--exec needs a command after --/],
    [['replay', 'inc', '--', 'true'], /needs --exec/],
    [['replay', 'inc', '--map', '/a=/b'], /--map needs --exec/],
    [['replay', 'inc', '--exec', '--pace', 'wall', '--', 'true'], /--pace/],
    [['replay', 'inc', '--exec', '--map', 'nothing', '--', 'true'], /FROM=TO/],
    [
      ['replay', 'inc', '--exec', '--log-level', 'debug', '--', 'true'],
      /--log-level applies to a replay through a daemon, not to --exec/,
    ],
    [
      ['replay', '--incident', 'x.kri', '--log-format', 'json'],
      /--log-format applies to a replay through a daemon, not to a local --incident/,
    ],
  ])('exits 2 for %j', async (args, message) => {
    const result = await kreplay(args).done;
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(message);
  });
});
