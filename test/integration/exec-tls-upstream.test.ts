/**
 * Issue 33, replay through TLS: a slow HTTPS upstream (1.5 s) recorded with the agent while an
 * ordinary client (Python's urllib over OpenSSL 3, or curl) calls it, then replayed with `--exec`
 * against an upstream that answers at once. The build's plaintext is out of reach of an
 * unprivileged replay, so requests are recognised by their TLS records (a ClientHello by its SNI,
 * application data by its order on the connection), never by ciphertext bytes: a 1 s client timeout
 * fails, a 5 s one passes with the response held as recorded, and the report says which rule
 * matched the hold.
 */
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { createCgroup, type TestCgroup } from '../support/cgroup';
import type { ExecReport } from '../support/exec/exec-report';
import { runCommand, UNPRIVILEGED, type Outcome } from '../support/exec/kreplay-run';
import { useTempDir } from '../support/temp-dir';
import { selfSignedCert } from '../../bench/tls-cert';
import { waitFor } from '../support/wait';

const CLIENT = join(__dirname, '..', 'support', 'exec', 'https-client.py');
const TXN = `tls-slow-${process.pid}`;
const dir = useTempDir('kreplay-exec-tls-');
let cgroup: TestCgroup;
let agent: AgentProcess | null = null;
let daemon: Daemon | null = null;
const servers: https.Server[] = [];

beforeAll(() => {
  cgroup = createCgroup(`kreplay-exec-tls-${process.pid}.service`);
});

afterEach(async () => {
  for (const server of servers.splice(0)) server.close();
  await daemon?.close();
  await agent?.stop();
  daemon = null;
  agent = null;
});

afterAll(() => cgroup?.remove());

/** An HTTPS server outside the traced cgroup that answers after `delayMs`. */
async function upstream(tls: { cert: string; key: string }, delayMs: number): Promise<number> {
  const server = https.createServer(
    { cert: readFileSync(tls.cert), key: readFileSync(tls.key) },
    (_req, res) => setTimeout(() => res.end('ok\n'), delayMs),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return (server.address() as AddressInfo).port;
}

/** CMD run by `kreplay run --txn TXN` in the traced cgroup, as a tagged job runs. */
function record(argv: string[]): Promise<number> {
  return new Promise((resolve) =>
    execFile(
      '/bin/sh',
      ['-c', `${cgroup.enter} "$@"`, 'sh', process.execPath, KREPLAY_BIN, 'run', '--txn', TXN, '--', ...argv],
      { timeout: 60_000 },
      (err) => resolve(err ? 1 : 0),
    ),
  );
}

it('a slow HTTPS upstream replays through TLS: 1 s times out, 5 s passes held as recorded, matched by TLS records', async () => {
  // the replay runs as uid 65534: it reads the incident and the certificate, and writes its reports here
  chmodSync(dir.path, 0o777);
  const tls = selfSignedCert(dir.path);
  const slow = await upstream(tls, 1500);
  const fast = await upstream(tls, 0);
  const data = join(dir.path, 'data');
  agent = await startAgent(['--data-dir', data, '--node', 'tls', '--cgroup-id', String(cgroup.id)]);
  daemon = await createDaemon({ dataDir: data, log: silentLogger });
  expect(await record(['/usr/bin/python3', CLIENT, String(slow), '10', tls.cert])).toBe(0);
  const recordedWait = await waitFor(async () => {
    const res = await fetch(
      `${daemon!.url}/api/events?transaction_id=${TXN}&event_type=sys_read&min_duration_ms=1000&int64=string`,
    );
    const { events } = (await res.json()) as { events: { target: string; response_ns: string | null }[] };
    const wait = events.find((e) => e.target === `tcp 127.0.0.1:${slow}` && e.response_ns);
    return wait ? Number(wait.response_ns) : undefined;
  });
  // the wait after the session tickets: the 1.5 s the upstream took, less the tickets' few ms
  expect(recordedWait).toBeGreaterThanOrEqual(1.4e9);
  const incident = join(dir.path, 'tls.kri');
  expect(
    (
      await runCommand([
        process.execPath,
        KREPLAY_BIN,
        'export',
        TXN,
        '--format',
        'incident',
        '-o',
        incident,
        '--server',
        daemon.url,
      ]).done
    ).status,
  ).toBe(0);
  chmodSync(incident, 0o644);

  const replay = async (name: string, build: string[]): Promise<{ run: Outcome; report: ExecReport }> => {
    const report = join(dir.path, `${name}.json`);
    const run = await runCommand([
      ...UNPRIVILEGED,
      process.execPath,
      KREPLAY_BIN,
      'replay',
      '--incident',
      incident,
      '--exec',
      '--map',
      `127.0.0.1:${slow}=127.0.0.1:${fast}`,
      '--report-json',
      report,
      '--',
      ...build,
    ]).done;
    if (!existsSync(report)) throw new Error(`replay ${name} wrote no report (${run.status}): ${run.stderr}`);
    return { run, report: JSON.parse(readFileSync(report, 'utf8')) as ExecReport };
  };
  const python = (seconds: number) => ['/usr/bin/python3', CLIENT, String(fast), String(seconds), tls.cert];
  const curl = (seconds: number) => [
    'curl',
    '-sS',
    '-o',
    '/dev/null',
    '--cacert',
    tls.cert,
    '--max-time',
    String(seconds),
    `https://127.0.0.1:${fast}/`,
  ];

  const patient = await replay('patient', python(5));
  expect({ status: patient.run.status, verdict: patient.report.verdict }).toEqual({
    status: 0,
    verdict: 'passed',
  });
  const held = patient.report.targets.find(
    (r) => r.call === 'response' && r.target === `tcp 127.0.0.1:${fast}`,
  )!;
  // the handshake's answer and the request's: the request's held from its send to the response's end
  // (the build's request may cross the server's session tickets: then it is a request the incident
  // never made, passed through behind the held answer, never released before it)
  expect(held).toEqual(expect.objectContaining({ held: true, matched: 2 }));
  expect(Number(held.observed_p99_ns)).toBeGreaterThanOrEqual(recordedWait);
  expect(held.reason).toContain('requests known by their TLS record type, matched in order');
  expect(Number(/got 200 in (\d+\.\d+) s/.exec(patient.run.stdout)![1]) * 1e9).toBeGreaterThanOrEqual(
    recordedWait,
  );
  expect(patient.report.causes.every((c) => c.exercised)).toBe(true);

  expect((await replay('impatient', python(1))).run.status).toBe(4);
  // curl times out (28) as the recorded Python client would have
  expect((await replay('curl-impatient', curl(1))).run.status).toBe(28);
  expect((await replay('curl-patient', curl(5))).run.status).toBe(0);
}, 120_000);
