/**
 * `kreplay replay --exec` beyond writes, against a real build under the real
 * kernel: fsyncs held per file, sends held by the bytes they carry (a build
 * that rechunks is held for the incident's total), connects held per peer,
 * and --replay-errors failing the calls that failed in production. The
 * incidents come from the daemon stand-in (test/support/exec-daemon.ts) with
 * exact recorded durations; a build is a Python program whose I/O model
 * nobody here chose (test/support/exec/calls-build.py).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KREPLAY_BIN } from '../support/agent-process';
import { incidentCall, startExecDaemon, type ExecDaemon, type IncidentEvent } from '../support/exec-daemon';
import { runCommand, tcpSink, type Outcome } from '../support/exec/kreplay-run';
import { useTempDir } from '../support/temp-dir';

const MS = 1_000_000;
const BUILD = join(__dirname, '..', 'support', 'exec', 'calls-build.py');
const dir = useTempDir('kreplay-calls-');
const daemonDir = useTempDir('kreplay-calls-daemon-');

const run = (command: string, args: string[]): Promise<Outcome> => runCommand([command, ...args]).done;

/** The build's `<what> <ns>` lines: per what, its times in ns. */
function times(stdout: string): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const match of stdout.matchAll(/^(\w+) (\d+)$/gm)) (out[match[1]!] ??= []).push(Number(match[2]));
  return out;
}

describe('kreplay replay --exec: fsync, sends, connect, errors', () => {
  let daemon: ExecDaemon | null = null;
  let sink: { port: number; close(): void } | null = null;
  afterEach(async () => {
    sink?.close();
    await daemon?.close();
    daemon = sink = null;
  });

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
      'python3',
      BUILD,
      ...build,
    ]);
  }

  const report = () => join(dir.path, 'report.json');
  const rows = () =>
    (JSON.parse(readFileSync(report(), 'utf8')) as { targets: Record<string, unknown>[] }).targets;

  it('holds the k-th fdatasync of a file as the incident did: the build logs "slow fdatasync" under replay only', async () => {
    const wal = join(dir.path, 'wal');
    const build = ['fsync', wal, '3', '1000'];
    const alone = await run('python3', [BUILD, ...build]);
    expect(alone.status).toBe(0);
    expect(alone.stdout).not.toContain('slow fdatasync');

    const recordedMs = [1200, 30, 60];
    const events = recordedMs.map((ms, k) =>
      incidentCall('inc', k * 1500, ms, 'sys_fsync', '/var/lib/db/wal', 'file', { syscall: 'fdatasync' }),
    );
    const result = await replay(
      events,
      ['--map', `/var/lib/db=${dir.path}`, '--report-json', report()],
      build,
    );
    expect(result.status).toBe(0);
    expect(result.stdout.match(/slow fdatasync/g)).toHaveLength(1);
    const took = times(result.stdout).fdatasync!;
    recordedMs.forEach((ms, k) => expect(took[k]).toBeGreaterThanOrEqual(ms * MS));
    expect(rows().find((r) => r.call === 'fsync')).toMatchObject({
      target: wal,
      kind: 'file',
      match: 'calls',
      recorded_calls: 3,
      matched: 3,
      failed: 0,
    });
    // the build's appends to the file are no writes the incident had: they pass
    expect(rows().find((r) => r.call === 'write' && r.target === wal)).toMatchObject({
      matched: 0,
      passed_through: 3,
    });
  });

  it('--replay-errors: an fdatasync that failed with EIO fails with EIO without running, and the build takes its error path', async () => {
    const wal = join(dir.path, 'wal');
    const events = [
      incidentCall('inc', 0, 2, 'sys_fsync', wal, 'file', { syscall: 'fdatasync' }),
      incidentCall('inc', 10, 8, 'sys_fsync', wal, 'file', { syscall: 'fdatasync', ret: -5 }),
    ];
    const plain = await replay(events, [], ['fsync', wal, '3', '1000']);
    expect(plain.status).toBe(0);
    await daemon!.close();
    daemon = null;
    const result = await replay(
      events,
      ['--replay-errors', '--report-json', report()],
      ['fsync', wal, '3', '1000'],
    );
    expect(result.stdout).toContain('fdatasync failed: EIO');
    expect(result.status).toBe(3);
    expect(times(result.stdout).fdatasync).toHaveLength(1);
    expect(rows().find((r) => r.call === 'fsync')).toMatchObject({
      recorded_errors: 1,
      matched: 2,
      failed: 1,
    });
    expect(result.stderr).toMatch(/\| fsync +\| [^|]*wal +\| file +\| 2 +\| 2 +\| 0 +\| 1 /);
  });

  // 20 sends of 8 KiB, 25 ms each: 500 ms for 160 KiB
  const sends = (port: number) =>
    Array.from({ length: 20 }, (_, k) =>
      incidentCall('inc', k * 30, 25, 'sys_write', `tcp 10.0.0.5:${port}`, 'socket', {
        syscall: 'sendto',
        bytes: 8192,
      }),
    );

  it.each([
    ['4 × 40 KiB', 40 * 1024],
    ['40 × 4 KiB', 4 * 1024],
  ])(
    'holds sends by their bytes: a build sending the 160 KiB as %s takes the incident 500 ms',
    async (_name, chunk) => {
      sink = await tcpSink();
      const result = await replay(
        sends(sink.port),
        ['--report-json', report()],
        ['send', String(sink.port), String(160 * 1024), String(chunk)],
      );
      expect(result.status).toBe(0);
      const sent = times(result.stdout).sent![0]!;
      expect(sent).toBeGreaterThanOrEqual(495 * MS);
      expect(sent).toBeLessThan(700 * MS);
      expect(
        rows().find((r) => r.call === 'write' && String(r.target).startsWith('tcp 10.0.0.5')),
      ).toMatchObject({
        kind: 'socket',
        match: 'bytes',
        recorded_calls: 20,
        recorded_bytes: 160 * 1024,
        matched: (160 * 1024) / chunk,
        matched_bytes: 160 * 1024,
        passed_through: 0,
      });
    },
  );

  it('--match calls keeps the k-th send to the k-th: 4 × 40 KiB take 4 recorded calls, 100 ms', async () => {
    sink = await tcpSink();
    const result = await replay(
      sends(sink.port),
      ['--match', 'calls'],
      ['send', String(sink.port), String(160 * 1024), String(40 * 1024)],
    );
    expect(result.status).toBe(0);
    const sent = times(result.stdout).sent![0]!;
    expect(sent).toBeGreaterThanOrEqual(100 * MS);
    expect(sent).toBeLessThan(300 * MS);
  });

  it('holds a blocking connect to a peer as long as the incident took: a 1 s timeout fires, a 5 s one passes', async () => {
    sink = await tcpSink();
    const events = [
      incidentCall('inc', 0, 1500, 'sys_connect', `tcp 10.0.0.5:${sink.port}`, 'socket', {
        syscall: 'connect',
      }),
    ];
    const alone = await run('python3', [BUILD, 'connect', String(sink.port), '1', 'blocking']);
    expect(alone.stdout).toMatch(/^connected /m);

    const short = await replay(
      events,
      ['--report-json', report()],
      ['connect', String(sink.port), '1', 'blocking'],
    );
    expect(short.stdout).toMatch(/^timeout /m);
    expect(short.status).toBe(4);
    expect(rows().find((r) => r.call === 'connect')).toMatchObject({
      kind: 'socket',
      recorded_calls: 1,
      matched: 1,
    });
    await daemon!.close();
    daemon = null;

    const long = await replay(events, [], ['connect', String(sink.port), '5', 'blocking']);
    expect(long.status).toBe(0);
    expect(times(long.stdout).connected![0]).toBeGreaterThanOrEqual(1500 * MS);
  });

  it('--replay-errors: a connect refused in production is refused, with a listener there', async () => {
    sink = await tcpSink();
    const events = [
      incidentCall('inc', 0, 3, 'sys_connect', `tcp 10.0.0.5:${sink.port}`, 'socket', {
        syscall: 'connect',
        ret: -111,
      }),
    ];
    const result = await replay(
      events,
      ['--replay-errors', '--report-json', report()],
      ['connect', String(sink.port), '5', 'blocking'],
    );
    expect(result.stdout).toMatch(/^refused /m);
    expect(result.status).toBe(5);
    expect(rows().find((r) => r.call === 'connect')).toMatchObject({ recorded_errors: 1, failed: 1 });
  });
});
