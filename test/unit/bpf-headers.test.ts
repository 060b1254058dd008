/**
 * Each bpf/capture/*.h holds one concern and includes what it uses: it compiles alone after the
 * kernel's types and libbpf's helpers (what capture.bpf.c includes first), with an include guard,
 * and the headers include each other without a circle (none declares another's function ahead).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');
const BPF = join(ROOT, 'bpf');
const HEADERS = readdirSync(join(BPF, 'capture'))
  .filter((file) => file.endsWith('.h'))
  .sort();
const PRELUDE = [
  '#include "vmlinux.h"',
  '#include <bpf/bpf_helpers.h>',
  '#include <bpf/bpf_tracing.h>',
  '#include <bpf/bpf_core_read.h>',
  '#include <bpf/bpf_endian.h>',
];
const text = (header: string) => readFileSync(join(BPF, 'capture', header), 'utf8');

/** The capture headers `header` includes. */
function includes(header: string): string[] {
  return [...text(header).matchAll(/^#include "([a-z_]+\.h)"$/gm)].map((m) => m[1]!);
}

/** A path that comes back to where it went through (a circle), walking `edges` from each node. */
function circleIn(nodes: string[], edges: (node: string) => string[]): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const visit = (header: string, path: string[]): string[] | undefined => {
    if (state.get(header) === 'done') return undefined;
    if (state.get(header) === 'open') return [...path, header];
    state.set(header, 'open');
    for (const next of edges(header)) {
      const found = visit(next, [...path, header]);
      if (found) return found;
    }
    state.set(header, 'done');
    return undefined;
  };
  for (const header of nodes) {
    const found = visit(header, []);
    if (found) return found;
  }
  return undefined;
}

describe('bpf/capture headers', () => {
  it.each(HEADERS)('%s compiles alone: it includes what it uses', (header) => {
    const source = [...PRELUDE, `#include "capture/${header}"`, ''].join('\n');
    const arch = process.arch === 'arm64' ? 'arm64' : 'x86';
    const result = spawnSync(
      'clang',
      [
        '-fsyntax-only',
        '-target',
        'bpf',
        '-mcpu=v3',
        `-D__TARGET_ARCH_${arch}`,
        '-Wall',
        '-Werror',
        '-I',
        BPF,
        '-x',
        'c',
        '-',
      ],
      { input: source, encoding: 'utf8' },
    );
    expect(result.error).toBeUndefined();
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it.each(HEADERS)('%s has its include guard', (header) => {
    const guard = `KREPLAY_CAPTURE_${header.replace(/\.h$/, '').toUpperCase()}_H`;
    expect(text(header)).toContain(`#ifndef ${guard}\n#define ${guard}\n`);
  });

  it('has no include circle, and no header declares a function ahead of its definition elsewhere', () => {
    expect(circleIn(HEADERS, includes)).toBeUndefined();
    const ahead = HEADERS.filter((header) => /^static __always_inline [^;{]*\([^;{]*\);/m.test(text(header)));
    expect(ahead).toEqual([]);
  });

  it('finds a circle where there is one (the check itself works)', () => {
    const graph: Record<string, string[]> = {
      'heads.h': ['goprocs.h'],
      'goprocs.h': ['golang.h'],
      'golang.h': ['heads.h'],
    };
    expect(circleIn(Object.keys(graph), (node) => graph[node] ?? [])).toEqual([
      'heads.h',
      'goprocs.h',
      'golang.h',
      'heads.h',
    ]);
    expect(circleIn(['golang.h'], includes)).toBeUndefined();
  });

  it('every header is one capture.bpf.c includes', () => {
    const program = readFileSync(join(BPF, 'capture.bpf.c'), 'utf8');
    expect(HEADERS.filter((header) => !program.includes(`#include "capture/${header}"`))).toEqual([]);
  });
});
