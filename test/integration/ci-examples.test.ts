/**
 * The CI examples (examples/ci/) run as written: every command, verbatim, the
 * install of kreplay included, as uid 65534 without capabilities, in a project
 * that keeps two incidents under incidents/ and builds with make. What the CI
 * service would provide is stood in for, as each example says: KREPLAY_URL is a
 * loopback HTTP server serving the `make dist` tarball, and the `services:`
 * Redis is a redis-server (apt) on the port the example maps.
 */
import { execFile, execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  createReadStream,
  mkdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { parse } from 'yaml';
import { repoRoot } from '../../core/repo-root';
import { VERSION } from '../../core/version';
import { incidentWrite } from '../support/exec-daemon';
import { UNPRIVILEGED } from '../support/exec/kreplay-run';
import { startRedis } from '../support/exec/redis';
import { writeIncident } from '../support/incident-file';
import { useTempDir } from '../support/temp-dir';

const EXAMPLES = join(repoRoot(), 'examples', 'ci');
const dir = useTempDir('kreplay-ci-');

interface GithubStep {
  name?: string;
  run?: string;
}
interface GithubJob {
  env?: Record<string, string>;
  services?: Record<string, { image: string; ports?: string[] }>;
  steps: GithubStep[];
}
interface GitlabJob {
  image?: string;
  services?: { name: string; alias?: string }[];
  before_script?: string[];
  script?: string[];
}

interface Example {
  /** each step's commands, in order; GitLab runs before_script and script in one shell */
  steps: string[];
  /** the Redis port the service container is reached on */
  redisPort: number;
}

/** Every command each example runs, as written. */
function examples(): [string, Example][] {
  const github = parse(readFileSync(join(EXAMPLES, 'github-actions.yml'), 'utf8')) as {
    permissions?: Record<string, string>;
    jobs: Record<string, GithubJob>;
  };
  const job = Object.values(github.jobs)[0]!;
  const gitlab = Object.values(
    parse(readFileSync(join(EXAMPLES, 'gitlab-ci.yml'), 'utf8')) as Record<string, GitlabJob>,
  )[0]!;
  return [
    [
      'github-actions.yml',
      {
        steps: job.steps.filter((s) => s.run !== undefined).map((s) => s.run!),
        redisPort: Number(job.services!.redis!.ports![0]!.split(':')[0]),
      },
    ],
    ['gitlab-ci.yml', { steps: [[...gitlab.before_script!, ...gitlab.script!].join('\n')], redisPort: 6379 }],
  ];
}

/** A project as the examples expect it: a Makefile (build, test) and incidents/*.kri its test reproduces. */
function project(path: string): void {
  mkdirSync(join(path, 'incidents'), { recursive: true });
  copyFileSync(join(repoRoot(), 'test', 'support', 'exec', 'exec-writer.c'), join(path, 'app.c'));
  writeFileSync(
    join(path, 'Makefile'),
    'build:\n\tmkdir -p build && cc -O2 -pthread -o build/app app.c\n' +
      'test:\n\t./build/app --file tmp/app/wal.log 3 --pipe 2 --tcp 6379 2\n',
  );
  // two incidents of production's /var/lib/app/wal.log (the example maps it onto tmp/app)
  const at = (txn: string, ms: number[], target: string, kind: 'file' | 'pipe' | 'socket', from: number) =>
    ms.map((d, i) => incidentWrite(txn, from + i * 20, d, target, kind));
  // and production's Redis, which CI gives as a service container
  writeIncident(join(path, 'incidents', 'checkout-timeout.kri'), [
    ...at('checkout-timeout', [15, 12, 18], '/var/lib/app/wal.log', 'file', 0),
    ...at('checkout-timeout', [5, 5], 'pipe', 'pipe', 100),
    ...at('checkout-timeout', [20, 20], 'tcp 10.0.0.5:6379', 'socket', 150),
  ]);
  writeIncident(
    join(path, 'incidents', 'slow-fsync.kri'),
    at('slow-fsync', [8, 8, 8], '/var/lib/app/wal.log', 'file', 0),
  );
  // the unprivileged user owns nothing here: the project is open to it, as a checkout is to the job
  for (const sub of ['', 'incidents']) chmodSync(join(path, sub), 0o777);
}

function runAsNobody(
  command: string,
  cwd: string,
  env: Record<string, string>,
): Promise<{ status: number; output: string }> {
  return new Promise((resolve) => {
    const [setpriv, ...args] = [...UNPRIVILEGED, 'bash', '-e', '-c', command];
    execFile(setpriv!, args, { cwd, timeout: 120_000, env }, (err, stdout, stderr) =>
      resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, output: stdout + stderr }),
    );
  });
}

/** The `make dist` tarball, served on loopback as a release host would. */
async function serveTarball(): Promise<{ url: string; close: () => void }> {
  execFileSync('make', ['-s', '-C', repoRoot(), 'dist'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const tarball = join(repoRoot(), `kreplay-${VERSION}-linux-x64.tar.gz`);
  const server = http.createServer((req, res) => {
    if (req.url !== `/kreplay-${VERSION}-linux-x64.tar.gz`) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/gzip' });
    createReadStream(tarball).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return { url: `http://127.0.0.1:${port}/kreplay-${VERSION}-linux-x64.tar.gz`, close: () => server.close() };
}

describe('the CI examples', () => {
  let release: { url: string; close: () => void };
  beforeAll(async () => {
    release = await serveTarball();
  }, 300_000);
  afterAll(() => release?.close());

  it('install kreplay from one URL variable (no pinned version, no placeholder), and GitHub sets the permissions its report action needs', () => {
    const github = readFileSync(join(EXAMPLES, 'github-actions.yml'), 'utf8');
    const gitlab = readFileSync(join(EXAMPLES, 'gitlab-ci.yml'), 'utf8');
    for (const text of [github, gitlab]) {
      expect(text).not.toMatch(/OWNER|KREPLAY_VERSION|0\.1\.0/);
      expect(text).toContain('curl -fsSL "$KREPLAY_URL" | tar -xz');
      expect(text).toMatch(/services:\n\s+(- name: )?redis/);
    }
    const parsed = parse(github) as { permissions: Record<string, string>; jobs: Record<string, GithubJob> };
    expect(parsed.permissions).toMatchObject({ checks: 'write', contents: 'read' });
    expect(Object.values(parsed.jobs)[0]!.env).toEqual({ KREPLAY_URL: '${{ vars.KREPLAY_URL }}' });
    expect(
      (parse(gitlab) as Record<string, GitlabJob>)['replay-incidents']!.before_script!.join('\n'),
    ).not.toMatch(/apt-get|sudo/);
  });

  it.each(examples())(
    '%s: every step, the install included, replays incidents/*.kri unprivileged',
    async (_name, example) => {
      const commands = example.steps;
      expect(commands.join('\n')).toMatch(/kreplay replay --incident 'incidents\/\*\.kri' --exec/);
      rmSync(dir.path, { recursive: true, force: true });
      mkdirSync(dir.path, { recursive: true });
      project(dir.path);
      const redis = (await startRedis(example.redisPort)).process;
      // the runner's environment: the variable the README asks for; GitHub's PATH file
      const githubPath = join(dir.path, '.github-path');
      writeFileSync(githubPath, '');
      chmodSync(githubPath, 0o666);
      const base = { KREPLAY_URL: release.url, HOME: dir.path, GITHUB_PATH: githubPath };
      try {
        for (const command of commands) {
          // each later step sees what earlier ones added to $GITHUB_PATH, as on a runner (kreplay
          // is not on the PATH otherwise: the repository's own bin/ is nowhere on it)
          const added = readFileSync(githubPath, 'utf8').split('\n').filter(Boolean).reverse();
          const env = { ...base, PATH: [...added, '/usr/local/bin:/usr/bin:/bin'].join(':') };
          const result = await runAsNobody(command, dir.path, env);
          if (result.status !== 0)
            throw new Error(`\`${command}\` exited ${result.status}:\n${result.output}`);
        }
      } finally {
        // gone before the next example starts its own on the same port
        const gone = new Promise((resolve) => redis.once('exit', resolve));
        redis.kill();
        await gone;
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
      // the upstream the service container gave was held as production's was
      expect(report.incidents[0]!.targets.find((t) => t.target === 'tcp 10.0.0.5:6379')).toMatchObject({
        matched: 2,
      });
    },
    300_000,
  );
});
