/**
 * `kreplay replay --incident FILE --exec` inside a container, as a GitHub Actions `container:` job
 * runs one (real kernel, rootful podman with runc, the kreplay image of `make image`): with
 * podman's default seccomp profile and capabilities, and as an unprivileged user, the build's
 * writes are held as recorded and the replay is green; under a profile that forbids what replay
 * needs (the seccomp() call that installs its user-notification filter) it says so, names the
 * code, and exits 1 before the build runs: never green.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { incidentWrite, type IncidentEvent } from '../support/exec-daemon';
import { writeIncident } from '../support/incident-file';
import { kreplayImage, RUN_FLAGS, usePodman } from '../support/podman';

const TXN = 'ci';
const WRITES = 6;
const HOLD_MS = 15;

const pods = usePodman('kreplay-execctr');
let dir: string;
let image: string;

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** `kreplay replay` of /work/incident.kri in the image, the build appending WRITES lines to /work/out/wal.log. */
function replayIn(extraArgs: string[]): { status: number | null; stdout: string; stderr: string } {
  const args = [
    'run',
    '--rm',
    ...RUN_FLAGS,
    `--volume=${dir}:/work`,
    '--workdir=/work',
    ...extraArgs,
    image,
    'replay',
    '--incident',
    '/work/incident.kri',
    '--exec',
    '--report-json',
    '/work/out/report.json',
    '--',
    'sh',
    '-c',
    `for i in $(seq 1 ${WRITES}); do echo "line $i" >> /work/out/wal.log; done`,
  ];
  try {
    const stdout = execFileSync('podman', args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 120_000,
    });
    return { status: 0, stdout, stderr: '' };
  } catch (err) {
    const e = err as { status: number | null; stdout: string; stderr: string };
    return { status: e.status, stdout: e.stdout, stderr: e.stderr };
  }
}

(pods.skip ? describe.skip : describe)('kreplay replay --exec in a CI container (podman)', () => {
  beforeAll(() => {
    image = kreplayImage();
    dir = mkdtempSync(join(tmpdir(), 'kreplay-execctr-'));
    chmodSync(dir, 0o777);
    const events: IncidentEvent[] = Array.from({ length: WRITES }, (_, i) =>
      incidentWrite(TXN, i * 20, HOLD_MS, '/work/out/wal.log', 'file'),
    );
    writeIncident(join(dir, 'incident.kri'), events);
    chmodSync(join(dir, 'incident.kri'), 0o644);
  });
  beforeEach(() => {
    rmSync(join(dir, 'out'), { recursive: true, force: true });
    mkdirSync(join(dir, 'out'));
    chmodSync(join(dir, 'out'), 0o777);
  });

  it.each([
    ['as root in the container (a container: job)', []],
    ['as uid 65534 in the container', ['--user=65534:65534']],
  ])("holds the build's writes under the default seccomp profile (%s)", (_name, user) => {
    const run = replayIn(user);
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
    const report = JSON.parse(readFileSync(join(dir, 'out', 'report.json'), 'utf8')) as {
      targets: { target: string; matched: number; held: boolean }[];
    };
    expect(report.targets.find((t) => t.target === '/work/out/wal.log')).toMatchObject({
      matched: WRITES,
      held: true,
    });
  });

  it('says what a profile forbids, names the code and exits 1, the build never run, when seccomp() is denied', () => {
    const profile = JSON.parse(readFileSync('/usr/share/containers/seccomp.json', 'utf8')) as {
      syscalls: { names: string[]; action: string; errnoRet?: number }[];
    };
    // podman's own default, less the call replay needs to hold anything
    profile.syscalls = [{ names: ['seccomp'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 }, ...profile.syscalls];
    for (const rule of profile.syscalls.slice(1)) rule.names = rule.names.filter((n) => n !== 'seccomp');
    writeFileSync(join(dir, 'no-seccomp.json'), JSON.stringify(profile));
    const run = replayIn([`--security-opt=seccomp=${join(dir, 'no-seccomp.json')}`]);
    process.stdout.write(`replay under a profile denying seccomp(): exit ${run.status}\n${run.stderr}\n`);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(
      /kreplay: replay needs seccomp user notification, .* failed with EPERM: this system's or container's seccomp profile forbids it .*the build was not run \(E_EXEC_SECCOMP\)/,
    );
    // the build never ran
    expect(() => readFileSync(join(dir, 'out', 'wal.log'))).toThrow();
  });
});
