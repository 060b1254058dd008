/**
 * One registered list of benchmarks (bench/benches.ts): every bench/ entry point is on it, every run
 * bench/RESULTS.md cites is one of it, and RESULTS.md opens with an index by topic giving each
 * registered bench's latest figure with its command, commit and date.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BENCH_TOPICS, BENCHES, isBenchName } from '../../bench/benches';
import { selection } from '../../bench/run';

const ROOT = resolve(__dirname, '..', '..');
const RESULTS = readFileSync(join(ROOT, 'bench', 'RESULTS.md'), 'utf8');
/** The index: from its heading to the rule that starts the history. */
const INDEX = RESULTS.slice(RESULTS.indexOf('## Index'), RESULTS.indexOf('\n---\n'));

/** Benchmark names RESULTS.md runs, however it writes the command. */
function cited(text: string): Set<string> {
  const names = new Set<string>();
  const patterns = [
    /node dist\/bench\/(?!run\.js)([a-z-]+)\.js/g,
    /BENCH=([a-z-]+)/g,
    /dist\/bench\/run\.js ([a-z-]+)/g,
    /bash bench\/([a-z-]+)\.sh/g,
  ];
  for (const pattern of patterns) for (const m of text.matchAll(pattern)) names.add(m[1]!);
  return names;
}

describe('benchmarks', () => {
  it('registers only benchmarks that exist, each a .ts entry point or a script', () => {
    for (const [name, bench] of Object.entries(BENCHES)) {
      const file = join(ROOT, 'bench', `${name}.${'script' in bench ? 'sh' : 'ts'}`);
      expect([name, existsSync(file)]).toEqual([name, true]);
    }
  });

  it('registers every bench/ module that is not a helper the others import or start', () => {
    const modules = readdirSync(join(ROOT, 'bench'))
      .filter((file) => file.endsWith('.ts'))
      .map((file) => file.replace(/\.ts$/, ''));
    // a helper is imported by another bench module, or started by one as its own process ('name.js')
    const used = new Set(
      modules.flatMap((name) =>
        [
          ...readFileSync(join(ROOT, 'bench', `${name}.ts`), 'utf8').matchAll(
            /from '\.\/([a-z-]+)'|'([a-z-]+)\.js'/g,
          ),
        ].map((m) => m[1] ?? m[2]!),
      ),
    );
    const unregistered = modules.filter((name) => !isBenchName(name) && !used.has(name) && name !== 'run');
    expect(unregistered).toEqual([]);
  });

  it('runs by name every benchmark RESULTS.md cites', () => {
    expect([...cited(RESULTS)].filter((name) => !isBenchName(name))).toEqual([]);
  });

  it("opens RESULTS.md with an index by topic: each registered bench's latest figure, command, commit and date", () => {
    const headings = [...INDEX.matchAll(/^### (.+)$/gm)].map((m) => m[1]!.toLowerCase());
    expect(headings).toEqual([...BENCH_TOPICS]);
    const rows = [...INDEX.matchAll(/^\| `([a-z-]+)`[^|]*\|([^|]+)\|([^|]+)\|([^|]+)\|/gm)];
    expect(new Set(rows.map((m) => m[1]))).toEqual(new Set(Object.keys(BENCHES)));
    for (const [, name, figure, command, landed] of rows) {
      expect([name, figure!.trim().length > 10]).toEqual([name, true]);
      expect([name, cited(command!)]).toEqual([name, new Set([name])]);
      const [, commit, date] = /^\s*([0-9a-f]{7,12}), (\d{4}-\d{2}-\d{2})\s*$/.exec(landed!) ?? [];
      expect([name, date]).toEqual([name, expect.stringMatching(/^2\d{3}-/)]);
      // the commit is in this repository's history
      expect(() =>
        execFileSync('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: ROOT }),
      ).not.toThrow();
    }
    // each bench is filed under the topic its registration gives
    const topics = new Map(
      INDEX.split('\n### ')
        .slice(1)
        .map((part) => [part.slice(0, part.indexOf('\n')).toLowerCase(), part] as const),
    );
    for (const [name, { topic }] of Object.entries(BENCHES))
      expect([name, topics.get(topic)?.includes(`| \`${name}\``)]).toEqual([name, true]);
  });

  it('refuses an unknown name, and arguments for more than one bench', () => {
    expect(selection(['go-overhead', '--', '3', '5'])).toEqual({ names: ['go-overhead'], args: ['3', '5'] });
    expect(selection([])).toMatchObject({ names: Object.keys(BENCHES) });
    expect(selection(['nope'])).toEqual({ error: expect.stringContaining('unknown benchmark nope') });
    expect(selection(['query', 'replay', '--', '3'])).toEqual({
      error: expect.stringContaining('go to one benchmark'),
    });
  });
});
