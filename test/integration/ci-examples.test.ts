/**
 * The CI examples (examples/ci/) run as written: their commands, verbatim, as
 * uid 65534 without capabilities, in a project that keeps two incidents under
 * incidents/ and builds with make. One stand-in, as each example says: the
 * install of the release tarball is replaced by the repository's bin/kreplay
 * on PATH.
 */
import { execFile } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { repoRoot } from '../../core/repo-root';
import { incidentWrite } from '../support/exec-daemon';
import { UNPRIVILEGED } from '../support/exec/kreplay-run';
import { writeIncident } from '../support/incident-file';
import { useTempDir } from '../support/temp-dir';

const EXAMPLES = join(repoRoot(), 'examples', 'ci');
const dir = useTempDir('kreplay-ci-');

interface GithubStep {
  name?: string;
  run?: string;
}

/** The commands each example runs after installing kreplay, as they are written. */
function exampleCommands(): [string, string[]][] {
  const github = parse(readFileSync(join(EXAMPLES, 'github-actions.yml'), 'utf8')) as {
    jobs: Record<string, { steps: GithubStep[] }>;
  };
  const steps = Object.values(github.jobs).flatMap((job) => job.steps);
  const gitlab = parse(readFileSync(join(EXAMPLES, 'gitlab-ci.yml'), 'utf8')) as Record<
    string,
    { script?: string[] }
  >;
  return [
    [
      'github-actions.yml',
      steps.filter((s) => s.run !== undefined && s.name !== 'Install kreplay').map((s) => s.run!),
    ],
    ['gitlab-ci.yml', Object.values(gitlab).flatMap((job) => job.script ?? [])],
  ];
}

/** A project as the examples expect it: a Makefile (build, test) and incidents/*.kri its test reproduces. */
function project(path: string): void {
  mkdirSync(join(path, 'incidents'), { recursive: true });
  copyFileSync(join(repoRoot(), 'test', 'support', 'exec', 'exec-writer.c'), join(path, 'app.c'));
  writeFileSync(
    join(path, 'Makefile'),
    'build:\n\tmkdir -p build && cc -O2 -pthread -o build/app app.c\n' +
      'test:\n\t./build/app --file tmp/app/wal.log 3 --pipe 2\n',
  );
  // two incidents of production's /var/lib/app/wal.log (the example maps it onto tmp/app)
  const at = (txn: string, ms: number[], target: string, kind: 'file' | 'pipe', from: number) =>
    ms.map((d, i) => incidentWrite(txn, from + i * 20, d, target, kind));
  writeIncident(join(path, 'incidents', 'checkout-timeout.kri'), [
    ...at('checkout-timeout', [15, 12, 18], '/var/lib/app/wal.log', 'file', 0),
    ...at('checkout-timeout', [5, 5], 'pipe', 'pipe', 100),
  ]);
  writeIncident(
    join(path, 'incidents', 'slow-fsync.kri'),
    at('slow-fsync', [8, 8, 8], '/var/lib/app/wal.log', 'file', 0),
  );
  // the unprivileged user owns nothing here: the project is open to it, as a checkout is to the job
  for (const sub of ['', 'incidents']) chmodSync(join(path, sub), 0o777);
}

function runAsNobody(command: string, cwd: string): Promise<{ status: number; output: string }> {
  return new Promise((resolve) => {
    const [setpriv, ...args] = [...UNPRIVILEGED, 'bash', '-e', '-c', command];
    execFile(
      setpriv!,
      args,
      {
        cwd,
        timeout: 120_000,
        env: { PATH: `${join(repoRoot(), 'bin')}:/usr/local/bin:/usr/bin:/bin`, HOME: cwd },
      },
      (err, stdout, stderr) =>
        resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr }),
    );
  });
}

describe('the CI examples', () => {
  it.each(exampleCommands())(
    '%s: its commands replay incidents/*.kri unprivileged',
    async (_name, commands) => {
      expect(commands.length).toBeGreaterThanOrEqual(2);
      expect(commands.join('\n')).toMatch(/kreplay replay --incident 'incidents\/\*\.kri' --exec/);
      project(dir.path);
      for (const command of commands) {
        const result = await runAsNobody(command, dir.path);
        if (result.status !== 0) throw new Error(`\`${command}\` exited ${result.status}:\n${result.output}`);
      }
      const junit = readFileSync(join(dir.path, 'kreplay-junit.xml'), 'utf8');
      expect(junit.match(/<testsuite /g)).toHaveLength(2);
      expect(junit).toMatch(/<testsuites [^>]*failures="0">/);
      const report = JSON.parse(readFileSync(join(dir.path, 'kreplay-report.json'), 'utf8')) as {
        incidents: { incident: string; verdict: string; targets: { target: string; matched: number }[] }[];
      };
      expect(report.incidents.map((i) => [i.incident, i.verdict])).toEqual([
        ['incidents/checkout-timeout.kri', 'passed'],
        ['incidents/slow-fsync.kri', 'passed'],
      ]);
      const wal = join(dir.path, 'tmp', 'app', 'wal.log');
      expect(report.incidents[0]!.targets.find((t) => t.target === wal)).toMatchObject({ matched: 3 });
    },
  );
});
