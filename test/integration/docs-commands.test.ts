/**
 * Every command the docs show (each line of a ```sh block in README.md and docs/*.md) is run by a
 * test, so a page cannot drift from what kreplay does:
 * - here, in the page's order, against a real daemon over a recorded transaction: the page's
 *   placeholders filled in (TXN, the daemon's address; `--server` added where the page relies on
 *   the default 127.0.0.1:7070), `kreplay` the repository's bin/kreplay, through bash with pipefail;
 * - or by the test named for it, which runs it as the page shows it (a package install, systemd, a
 *   ClickHouse fleet), and which must still hold what runs it.
 * A command on a page and in neither list fails here. docs/operate.md's --config example is loaded
 * by test/unit/readme-config.test.ts.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { silentLogger } from '../../core/log/logger';
import { repoRoot } from '../../core/repo-root';
import { OtlpReceiver } from '../support/otlp-receiver';
import { createDaemon, type Daemon } from '../../daemon/create-daemon';
import { writeStore } from '../support/event-store';
import { useTempDir } from '../support/temp-dir';

const ROOT = repoRoot();
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const TXN = 'checkout-timeout';
const DEFAULT_SERVER = 'http://127.0.0.1:7070';
/** The OTLP/HTTP receiver the pages send to, played here by a test server. */
const COLLECTOR = 'http://otel-collector:4318';
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

/** Commands another test runs as the page shows them: the test, and what in it runs the command. */
const ELSEWHERE: [command: RegExp, test: string, runs: string][] = [
  // `make test` is the suite itself; `make run` is `kreplay up --data-dir var` after `make build`
  [/^make test$/, 'Makefile', 'npx jest --ci'],
  [/^make run$/, 'Makefile', 'bin/kreplay.js up --data-dir var'],
  [/^make run$/, 'test/integration/up.test.ts', "KREPLAY_BIN, 'up'"],
  [
    /^dpkg -i kreplay_[\d.]+_amd64\.deb$/,
    'test/system/systemd.test.ts',
    "sh('dpkg -i /packages/previous.deb')",
  ],
  [
    /^systemctl status kreplay-agent kreplay-daemon$/,
    'test/system/systemd.test.ts',
    'systemctl is-active ${UNITS}',
  ],
  [
    /^systemd-sysusers && systemd-tmpfiles --create$/,
    'test/integration/deploy.test.ts',
    "execFileSync('systemd-sysusers'",
  ],
  [
    /^systemctl daemon-reload && systemctl enable --now kreplay-agent kreplay-daemon$/,
    'test/system/systemd.test.ts',
    'systemctl start ${UNITS}',
  ],
  // the tarball, installed from a URL and run by an unprivileged user
  [
    /^curl -LO \S+\.tar\.gz && tar -xzf kreplay-[\d.]+-linux-x64\.tar\.gz$/,
    'test/integration/package.test.ts',
    "'tar', '-xzf'",
  ],
  [
    /^\.\/kreplay\/bin\/kreplay replay TXN --exec --server \S+ -- \.\/build\/app$/,
    'test/integration/exec-replay.test.ts',
    "['replay', 'inc', '--exec', '--server', url",
  ],
  // an agent runs until stopped: its hook selectors as hook-scope starts them
  [
    /^kreplay agent --data-dir \/var\/lib\/kreplay --hook-exclude \S+$/,
    'test/integration/hook-scope.test.ts',
    "'--hook-exclude',",
  ],
  [
    /^kreplay agent --data-dir \/var\/lib\/kreplay --hook-include \S+$/,
    'test/integration/hook-scope.test.ts',
    "'--hook-include',",
  ],
  // a ClickHouse fleet: the agent shipping and the daemon reading a cluster
  [
    /^kreplay agent --ship 'clickhouse:\/\/\S+' …$/,
    'test/integration/clickhouse-agent.test.ts',
    "'--ship', `clickhouse://",
  ],
  [
    /^kreplay daemon --data-dir DIR --store 'clickhouse:\/\/\S+cluster=\S+'$/,
    'test/integration/clickhouse-cluster.test.ts',
    'store: cluster.url(DB, 0, 2)',
  ],
];

/** Each command line of the page's ```sh blocks, its trailing comment removed. */
function commands(page: string): string[] {
  const text = readFileSync(join(ROOT, page), 'utf8');
  return [...text.matchAll(/^```sh\n([\s\S]*?)^```/gm)].flatMap((block) =>
    block[1]!
      .split('\n')
      .map((line) => line.replace(/\s+#.*$/, '').trim())
      .filter((line) => line !== ''),
  );
}

const all = PAGES.flatMap((page) => commands(page).map((command) => ({ page, command })));
const elsewhere = (command: string) => ELSEWHERE.filter(([pattern]) => pattern.test(command));
const here = all.filter(({ command }) => elsewhere(command).length === 0);

function run(command: string, cwd: string): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      ['-e', '-o', 'pipefail', '-c', command],
      { cwd, timeout: 60_000, env: { ...process.env, PATH: `${join(ROOT, 'bin')}:${process.env.PATH}` } },
      (err, stdout, stderr) =>
        resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('the commands the docs show', () => {
  const dir = useTempDir('kreplay-docs-');
  let daemon: Daemon | null = null;
  let collector: OtlpReceiver | null = null;
  afterEach(async () => {
    await daemon?.close();
    daemon = null;
    await collector?.close();
    collector = null;
  });

  it('finds the commands of every page (the check itself works)', () => {
    expect(all.map((c) => c.command)).toEqual(
      expect.arrayContaining([
        "curl -s 'http://127.0.0.1:7070/api/events?limit=10'",
        'zstd -dc checkout-timeout.kri | jq .header',
      ]),
    );
  });

  it.each(ELSEWHERE.map(([pattern, test, runs]) => [pattern.source, test, runs]))(
    '%s: %s runs it',
    (pattern, test, runs) => {
      expect(all.some(({ command }) => new RegExp(pattern).test(command))).toBe(true);
      expect(readFileSync(join(ROOT, test), 'utf8')).toContain(runs);
    },
  );

  it('runs every other one against a real daemon, in the pages’ order', async () => {
    const data = join(dir.path, 'data');
    const T0 = 1_763_856_000_000_000_000n;
    const traced = { trace: TRACE, parentSpan: '00f067aa0ba902b7', traceFlags: 1 };
    writeStore(data, 'web-1', [
      { ts: T0, txn: TXN, ...traced, target: ['socket', 'tcp 10.0.0.5:6379'], dur: 2_000 },
      {
        ts: T0 + 5_000_000n,
        txn: TXN,
        ...traced,
        type: 'sys_read',
        target: ['socket', 'tcp 10.0.0.5:6379'],
        response: 1_500_000_000,
      },
      {
        ts: T0 + 1_600_000_000n,
        txn: TXN,
        ...traced,
        target: ['file', '/var/lib/app/orders.db'],
        dur: 40_000,
      },
    ]);
    daemon = await createDaemon({ dataDir: data, log: silentLogger });
    const url = daemon.url;
    collector = await OtlpReceiver.start();
    const collectorUrl = collector.url;
    const fill = (command: string) => {
      let filled = command
        .replace(/\bTXN\b/g, TXN)
        .replaceAll(DEFAULT_SERVER, url)
        .replaceAll(COLLECTOR, collectorUrl);
      // a kreplay command that asks the daemon at its default address asks this one
      if (/^kreplay (export|events|replay|session)\b/.test(filled) && !filled.includes('--server'))
        filled += ` --server ${url}`;
      return filled;
    };
    for (const { page, command } of here) {
      const result = await run(fill(command), dir.path);
      expect({ page, command, status: result.status, stderr: result.stderr }).toEqual({
        page,
        command,
        status: 0,
        stderr: expect.not.stringMatching(/error|fail/i) as unknown,
      });
    }
    // what they made is what the pages say: the spans in the collector, an incident file, a Chrome trace
    expect(collector.spans.map((span) => span.traceId)).toContain(TRACE);
    expect(existsSync(join(dir.path, 'checkout-timeout.kri'))).toBe(true);
    const trace = JSON.parse(readFileSync(join(dir.path, 'incident.json'), 'utf8')) as {
      traceEvents: unknown[];
    };
    expect(trace.traceEvents.length).toBeGreaterThan(0);
  });
});
