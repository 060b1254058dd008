/** The folder tree says what depends on what: these imports would make it lie. */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');

/**
 * What the repository's root may hold: the build and lint configuration, the project's front
 * pages and one folder per part. Anything else (a test's port file, a scratch log) belongs in a
 * temporary directory or a part's own folder.
 */
const ROOT_ENTRIES = new Set([
  '.ci/',
  '.clang-format',
  '.gitignore',
  '.prettierignore',
  '.prettierrc.json',
  'CHANGELOG.md',
  'CONTRIBUTING.md',
  'Makefile',
  'README.md',
  'eslint.config.mjs',
  'jest.config.js',
  'package-lock.json',
  'package.json',
  'tsconfig.build.json',
  'tsconfig.json',
  ...[
    'agent',
    'bench',
    'bin',
    'bpf',
    'cli',
    'core',
    'daemon',
    'deploy',
    'docs',
    'examples',
    'native',
    'test',
    'tools',
    'web',
  ].map((folder) => `${folder}/`),
]);

/** The root's entries git sees: committed, and untracked but not ignored (what a test left behind). */
function rootEntries(): string[] {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  const entries = files
    .split('\n')
    .filter(Boolean)
    .map((file) => (file.includes('/') ? `${file.slice(0, file.indexOf('/'))}/` : file));
  return [...new Set(entries)].sort();
}

/**
 * native/ by concern: each room may include its own files and those of the rooms listed here (the
 * root's utilities: errors, the log, the file lock, thread scheduling). The addon's entry,
 * native/addon.cc, binds them all. A file includes another by its name (binding.gyp's include
 * directories), so each name is in one room only.
 */
const NATIVE_ROOMS: Record<string, string[]> = {
  '': [''],
  capture: ['capture', 'probes', ''],
  probes: ['probes', ''],
  python: ['python', 'probes', ''],
  exec: ['exec', 'capture', ''],
};

/** The addon's C++ files (not the SQLite extension's C, nor the launcher's), by name, with their room. */
function nativeFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const room of Object.keys(NATIVE_ROOMS))
    for (const file of readdirSync(join(ROOT, 'native', room)))
      if (/\.(cc|h)$/.test(file)) {
        if (files.has(file))
          throw new Error(`native/${room}/${file}: its name is in native/${files.get(file)} too`);
        files.set(file, room);
      }
  return files;
}

/** Includes from one room into a room it may not include, as `native/room/file -> native/room/included`. */
function nativeOffences(files: Map<string, string>): string[] {
  const offences: string[] = [];
  for (const [file, room] of files) {
    if (room === '' && file === 'addon.cc') continue;
    const path = join('native', room, file);
    for (const m of readFileSync(join(ROOT, path), 'utf8').matchAll(/^#include "([^"]+)"/gm)) {
      const target = files.get(m[1]!);
      if (target !== undefined && !NATIVE_ROOMS[room]!.includes(target))
        offences.push(`${path} -> ${join('native', target, m[1]!)}`);
    }
  }
  return offences;
}

function sources(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => join(folder, file));
}

/**
 * Repository-relative paths of the modules `file` imports from the project: statically (`import …
 * from`, `export … from`, type-only included), when first needed (`await import(…)`) or as a type
 * (`typeof import(…)`).
 */
function imports(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(/(?:\bfrom\s+|\bimport\(\s*)'(\.[^']+)'/g)].map((m) =>
    relative(ROOT, resolve(ROOT, dirname(file), m[1]!)),
  );
}

function offending(folder: string, forbidden: string): string[] {
  return sources(folder).flatMap((file) =>
    imports(file)
      .filter((target) => target === forbidden || target.startsWith(`${forbidden}/`))
      .map((target) => `${file} -> ${target}`),
  );
}

/** Modules (repository-relative, without `.ts`) each source of `folders` imports from the project. */
function importGraph(folders: string[]): Map<string, string[]> {
  const files = folders.flatMap(sources);
  const known = new Set(files.map((file) => file.replace(/\.ts$/, '')));
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = imports(file)
      .map((target) => (known.has(target) ? target : `${target}/index`))
      .filter((target) => known.has(target));
    graph.set(file.replace(/\.ts$/, ''), targets);
  }
  return graph;
}

/** The strongly connected groups of more than one module (Tarjan), each sorted. */
function circlesOf(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) !== index.get(node)) return;
    const group: string[] = [];
    for (let member = stack.pop()!; ; member = stack.pop()!) {
      onStack.delete(member);
      group.push(member);
      if (member === node) break;
    }
    if (group.length > 1) circles.push(group.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return circles;
}

function importCircles(folders: string[]): string[][] {
  return circlesOf(importGraph(folders));
}

describe('layout', () => {
  it.each([
    ['daemon', 'agent'],
    ['core', 'agent'],
    ['core', 'daemon'],
    ['core', 'cli'],
    ['agent', 'daemon'],
    ['agent/ingest', 'agent/store'],
    ['daemon/replay/stream', 'daemon/replay/sessions'],
    // the stores know nothing of who asks: HTTP, the events routes and replay build on them
    ['daemon/store', 'daemon/http'],
    ['daemon/store', 'daemon/events'],
    ['daemon/store', 'daemon/replay'],
    // the clock and the streams meet only in what replay/ shares with both (replay-clock, send-buffer)
    ['daemon/replay/stream', 'daemon/replay/clock'],
    ['daemon/replay/clock', 'daemon/replay/stream'],
    // one folder owns a lane's buffer (layout, writer, reader, frame): the clock, the sessions and
    // the query workers build on it, and it on none of them
    ['daemon/replay/lane', 'daemon/replay/clock'],
    ['daemon/replay/lane', 'daemon/replay/sessions'],
    ['daemon/replay/lane', 'daemon/replay/stream'],
    ['daemon/queries', 'daemon/replay/sessions'],
    ['bench', 'test'],
  ])('%s imports nothing from %s', (folder, forbidden) => {
    expect(offending(folder, forbidden)).toEqual([]);
  });

  it('has no import circle, type-only imports included', () => {
    expect(importCircles(['core', 'agent', 'daemon', 'cli', 'bench', 'tools'])).toEqual([]);
  });

  it("keeps native/ by concern: capture, probes, python, exec, and the root's utilities", () => {
    const files = nativeFiles();
    expect(nativeOffences(files)).toEqual([]);
    // every C++ file of the addon is in a room: none in a folder the rooms do not name
    const placed = new Set([...files].map(([file, room]) => join('native', room, file)));
    const everywhere = readdirSync(join(ROOT, 'native'), { recursive: true, encoding: 'utf8' })
      .filter((file) => /\.(cc|h)$/.test(file) && !file.startsWith('build/') && !file.startsWith('sqlite/'))
      .map((file) => join('native', file));
    expect(everywhere.filter((file) => !placed.has(file))).toEqual([]);
    // and the check sees an include across rooms (the capture engine attaches the probes)
    expect(readFileSync(join(ROOT, 'native', 'capture', 'capture_engine.cc'), 'utf8')).toContain(
      '#include "go_probes.h"',
    );
    expect(files.get('go_probes.h')).toBe('probes');
  });

  it('holds at the root only the files and folders it lists', () => {
    expect(rootEntries().filter((entry) => !ROOT_ENTRIES.has(entry))).toEqual([]);
  });

  it('finds a circle where there is one (the check itself works)', () => {
    const graph = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a', 'd']],
      ['d', []],
    ]);
    expect(circlesOf(graph)).toEqual([['a', 'b', 'c']]);
  });

  it('sees the imports it forbids elsewhere (the check itself works)', () => {
    expect(offending('agent/store', 'agent/ingest')).toContain(
      'agent/store/event-insert.ts -> agent/ingest/event-batch',
    );
    // and those made when first needed
    expect(offending('cli/commands', 'daemon/create-daemon')).toContain(
      'cli/commands/daemon.ts -> daemon/create-daemon',
    );
  });
});
