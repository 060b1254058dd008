/** The storm writer of the drop and storm tests, compiled into a test's temp dir. */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The fd the storm writes to: give it one (e.g. /dev/null) in spawn's stdio. */
export const STORM_FD = 3;

// Waits for a byte on stdin (the capture is attached by then), then writes one
// byte to STORM_FD argv[1] times and nothing else.
const STORM_C = `
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
  long m = atol(argv[1]);
  char go;
  if (read(0, &go, 1) != 1) return 2;
  for (long i = 0; i < m; i++)
    if (write(${STORM_FD}, "x", 1) != 1) return 1;
  return 0;
}
`;

/** Compiles the storm writer into `dir`; returns its path. */
export function buildStormWriter(dir: string): string {
  writeFileSync(join(dir, 'storm.c'), STORM_C);
  const storm = join(dir, 'storm');
  execFileSync('cc', ['-O2', '-o', storm, join(dir, 'storm.c')]);
  return storm;
}
