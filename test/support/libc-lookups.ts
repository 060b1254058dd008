/**
 * Connects a program makes without asking: where glibc looks a user up (Python does at start-up
 * when HOME is unset, as in CI), it first tries nscd's unix socket and fails with ENOENT.
 * Tests that check a program's own connects leave these out.
 */
export const NSCD_SOCKET_TARGET = 'unix /var/run/nscd/socket';

export function isLibcLookup(target: string | null | undefined): boolean {
  return target === NSCD_SOCKET_TARGET;
}
