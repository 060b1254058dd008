import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { VERSION } from '../../core/version';

const BIN = join(__dirname, '..', '..', 'bin', 'kreplay.js');
const kreplay = (...args: string[]) =>
  spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30000 });

describe('kreplay CLI', () => {
  it('prints help for the whole and for each subcommand', () => {
    const top = kreplay('--help');
    expect(top.status).toBe(0);
    expect(top.stdout).toMatch(/agent/);
    expect(top.stdout).toMatch(/daemon/);
    for (const sub of ['agent', 'daemon']) {
      const help = kreplay(sub, '--help');
      expect(help.status).toBe(0);
      expect(help.stdout).toMatch(/--data-dir/);
    }
  });

  it('starts without loading what only the agent or the daemon runs on (zod, express, yaml, prom-client)', () => {
    // every command's start (replay --incident in a CI job above all) pays for what main loads
    const main = join(__dirname, '..', '..', 'dist', 'cli', 'main.js');
    const script = `require(${JSON.stringify(main)}).buildProgram();
      console.log(JSON.stringify(Object.keys(require.cache)))`;
    const out = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 });
    expect(out.status).toBe(0);
    const loaded = (JSON.parse(out.stdout) as string[]).map(
      (path) => /node_modules\/([^/]+)\//.exec(path)?.[1],
    );
    for (const heavy of ['zod', 'express', 'yaml', 'prom-client']) expect(loaded).not.toContain(heavy);
  });

  it("a command's start loads that command's modules only: replay loads no SQLite, logger nor other command", () => {
    // main registers the command argv names alone (what `replay --incident --exec` loads is added to the build's run)
    const main = join(__dirname, '..', '..', 'dist', 'cli', 'main.js');
    const script = `require(${JSON.stringify(main)}).buildProgram('replay');
      console.log(JSON.stringify(Object.keys(require.cache)))`;
    const out = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 });
    expect(out.status).toBe(0);
    const loaded = JSON.parse(out.stdout) as string[];
    expect(loaded.filter((path) => /node_modules\/(better-sqlite3|pino)\//.test(path))).toEqual([]);
    expect(loaded.filter((path) => /dist\/cli\/commands\/(?!replay\.js)/.test(path))).toEqual([]);
    // nor the session streaming, the local player or the writer of incident files
    expect(
      loaded.filter((path) => /(session-replay|local-replay|sse-client|incident-writer)\.js$/.test(path)),
    ).toEqual([]);
    // and up, which takes the agent's and the daemon's flags, still has them
    const up = kreplay('up', '--help');
    expect(up.status).toBe(0);
    expect(up.stdout).toMatch(/--ring-buffer-mb/);
    expect(up.stdout).toMatch(/--session-ttl/);
  });

  it('prints the version from package.json, the commit built, the Node and the libbpf it runs on', () => {
    const out = kreplay('--version');
    expect(out.status).toBe(0);
    const [name, commit, node, libbpf, ...rest] = out.stdout.trimEnd().split('\n');
    expect(name).toBe(`kreplay ${VERSION}`);
    // a commit of this repository (the one `make build` ran at), with -dirty for a changed tree
    const hash = /^commit: ([0-9a-f]{12})(-dirty)?$/.exec(commit!)?.[1];
    expect(hash).toBeDefined();
    expect(spawnSync('git', ['cat-file', '-e', `${hash}^{commit}`]).status).toBe(0);
    expect(node).toBe(`node: ${process.versions.node}`);
    expect(libbpf).toMatch(/^libbpf: \d+\.\d+$/);
    expect(rest).toEqual([]);
  });

  it.each([
    [['daemon', '--data-dir', 'x', '--bogus'], /--bogus/],
    [['daemon', '--data-dir', 'x', '--port', 'abc'], /--port.*expected an integer/],
    [['daemon', '--data-dir', 'x', '--port', '70000'], /--port.*0\.\.65535/],
    [['agent', '--data-dir', 'x', '--pid', '-3'], /--pid/],
    [['agent'], /--data-dir/],
    [['frobnicate'], /frobnicate/],
    // up checks the flags it forwards with the children's own parsers
    [['up', '--data-dir', 'x', '--session-ttl', 'abc'], /--session-ttl.*expected an integer/],
    [['up', '--data-dir', 'x', '--metrics-listen', 'nowhere'], /--metrics-listen.*expected HOST:PORT/],
    // found bad inside the command's action, after commander's parsing
    [['daemon', '--data-dir', 'x', '--tls-cert', 'cert.pem'], /--tls-cert and --tls-key go together/],
    [['agent', '--data-dir', 'x', '--node', 'no spaces'], /--node "no spaces" must be/],
    [['agent', '--data-dir', 'x', '--ring-buffer-mb', '3'], /--ring-buffer-mb 3 must be a power of two/],
    [
      ['agent', '--data-dir', 'x', '--max-commit-wait-ms', '100'],
      /--max-commit-wait-ms.*200\.\.10000, got 100/,
    ],
    [['agent', '--data-dir', 'x', '--max-commit-wait-ms', '1s'], /--max-commit-wait-ms.*expected an integer/],
    [['agent', '--data-dir', 'x', '--ship-user', 'u'], /--ship-user and --ship-password-file need --ship/],
  ])('exits 2 naming the flag for %j', (args, message) => {
    const out = kreplay(...args);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(message);
  });

  it('exits 1 naming a bad config file', () => {
    const out = kreplay('agent', '--data-dir', '/tmp/kreplay-cli-test', '--config', '/nonexistent.yaml');
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(/cannot read config file \/nonexistent\.yaml/);
  });
});
