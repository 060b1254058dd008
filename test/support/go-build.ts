/** Builds a test's Go program with Debian's golang-go, offline, in the ways Go services are built. */
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * default: `go build` (cgo on, as Debian's go has gcc: linked by Go's own linker against libc);
 * static: CGO_ENABLED=0; external: cgo linked by the system linker (-linkmode=external);
 * stripped: `-ldflags=-s -w`; no-dwarf: `-ldflags=-w` (a symbol table, no DWARF).
 */
export type GoBuild = 'default' | 'static' | 'external' | 'stripped' | 'no-dwarf';

const FLAGS: Record<GoBuild, string[]> = {
  default: [],
  static: [],
  external: ['-ldflags=-linkmode=external'],
  stripped: ['-ldflags=-s -w'],
  'no-dwarf': ['-ldflags=-w'],
};

/** Builds `source` into `output`. The build cache is kept across runs (CI has no HOME). */
export function buildGo(source: string, output: string, build: GoBuild = 'default'): string {
  const cache = join(tmpdir(), 'kreplay-go-cache');
  execFileSync('go', ['build', ...FLAGS[build], '-o', output, source], {
    env: {
      ...process.env,
      GOCACHE: join(cache, 'build'),
      GOPATH: join(cache, 'path'),
      GO111MODULE: 'off',
      CGO_ENABLED: build === 'static' ? '0' : '1',
    },
  });
  return output;
}
