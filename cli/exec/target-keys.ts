/**
 * How a recorded write target is named in the test build: `--map FROM=TO`
 * rewrites, and the port key sockets fall back to. The native supervisor
 * (native/exec_target.cc, PortKey) builds the same port key for the calls it sees.
 */
import { InvalidArgumentError } from 'commander';

export interface TargetMap {
  from: string;
  to: string;
}

/** `--map FROM=TO`, repeatable: a path prefix (`/var/lib/app=/tmp/app`) or a socket address (`10.0.0.5:5432=127.0.0.1:15432`, or a host alone). */
export function collectMaps(value: string, previous: TargetMap[] = []): TargetMap[] {
  const eq = value.indexOf('=');
  if (eq <= 0 || eq === value.length - 1)
    throw new InvalidArgumentError(`expected FROM=TO (a path prefix or a socket address), got "${value}"`);
  return [...previous, { from: value.slice(0, eq), to: value.slice(eq + 1) }];
}

/** FROM is a prefix of `path` ending at a component boundary: /var/lib/app covers /var/lib/app/wal.log, not /var/lib/apple. */
function mapPath(path: string, { from, to }: TargetMap): string | null {
  if (path === from) return to;
  const base = from.endsWith('/') ? from : `${from}/`;
  if (!path.startsWith(base)) return null;
  return (to.endsWith('/') ? to : `${to}/`) + path.slice(base.length);
}

/** `host:port` or `[v6]:port` → its host part. */
function hostOf(address: string): string {
  const colon = address.lastIndexOf(':');
  return colon === -1 ? address : address.slice(0, colon);
}

function mapAddress(address: string, { from, to }: TargetMap): string | null {
  if (address === from) return to;
  if (hostOf(address) === from) return `${to}${address.slice(hostOf(address).length)}`;
  return null;
}

/** The recorded target as the test build names it: the first map that applies, else unchanged. */
export function mapTarget(target: string, kind: string, maps: readonly TargetMap[]): string {
  for (const map of maps) {
    let mapped: string | null = null;
    if (kind === 'socket') {
      const space = target.indexOf(' ');
      if (space !== -1) {
        const proto = target.slice(0, space);
        const rest = target.slice(space + 1);
        const next = proto === 'unix' ? mapPath(rest, map) : mapAddress(rest, map);
        mapped = next === null ? null : `${proto} ${next}`;
      }
    } else if (target.startsWith('/')) {
      mapped = mapPath(target, map);
    }
    if (mapped !== null) return mapped;
  }
  return target;
}

/** `tcp 10.0.0.5:5432` → `tcp *:5432`; null for targets without a port (unix sockets, files). */
export function portKey(target: string): string | null {
  const space = target.indexOf(' ');
  const colon = target.lastIndexOf(':');
  if (space === -1 || colon < space || target.startsWith('unix')) return null;
  return `${target.slice(0, space)} *:${target.slice(colon + 1)}`;
}
