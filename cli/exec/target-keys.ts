/**
 * How a recorded write target is named in the test build: `--map FROM=TO`
 * rewrites, and the port key sockets fall back to (the supervisor's, through the addon).
 */
import { InvalidArgumentError } from 'commander';
import { nativeAddon } from '../../core/native/addon';

export interface TargetMap {
  from: string;
  to: string;
  /** a socket protocol both sides named (`tcp 10.0.0.5:6379=tcp 127.0.0.1:6379`): only its targets map */
  proto?: string;
  /** the rule as typed, for messages */
  text?: string;
}

/** `tcp 10.0.0.5:6379` → proto and address: the form targets are shown in (and the report's hint gives). */
const PROTO = /^([a-z][a-z0-9]*) (\S.*)$/;

/**
 * `--map FROM=TO`, repeatable: a path prefix (`/var/lib/app=/tmp/app`) or a socket address
 * (`10.0.0.5:5432=127.0.0.1:15432`, or a host alone), either side optionally named as the report
 * names targets (`tcp 10.0.0.5:5432`, `unix /run/app.sock`).
 */
export function collectMaps(value: string, previous: TargetMap[] = []): TargetMap[] {
  const eq = value.indexOf('=');
  if (eq <= 0 || eq === value.length - 1)
    throw new InvalidArgumentError(`expected FROM=TO (a path prefix or a socket address), got "${value}"`);
  let from = value.slice(0, eq).trim();
  let to = value.slice(eq + 1).trim();
  const fromProto = PROTO.exec(from);
  const toProto = PROTO.exec(to);
  if (fromProto && toProto && fromProto[1] !== toProto[1])
    throw new InvalidArgumentError(
      `--map ${value}: a map cannot change the protocol (${fromProto[1]} to ${toProto[1]})`,
    );
  const proto = fromProto?.[1] ?? toProto?.[1];
  if (fromProto) from = fromProto[2]!;
  if (toProto) to = toProto[2]!;
  const map: TargetMap = { from, to, text: value };
  if (proto !== undefined) map.proto = proto;
  return [...previous, map];
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
        if (map.proto !== undefined && map.proto !== proto) continue;
        // `tcp accepted 10.0.0.5:8080` maps by its address as `tcp 10.0.0.5:8080` does
        const at = target.lastIndexOf(' ');
        const rest = target.slice(at + 1);
        const next = proto === 'unix' ? mapPath(target.slice(space + 1), map) : mapAddress(rest, map);
        mapped = next === null ? null : `${target.slice(0, proto === 'unix' ? space : at)} ${next}`;
      }
    } else if (map.proto === undefined && target.startsWith('/')) {
      mapped = mapPath(target, map);
    }
    if (mapped !== null) return mapped;
  }
  return target;
}

/**
 * `tcp 10.0.0.5:5432` → `tcp *:5432`; null for targets without a port (unix sockets, files). Built
 * by the supervisor's own code (native/exec/exec_match.cc), so the plan's keys and the keys of the
 * build's calls cannot drift apart.
 */
export const portKey = (target: string): string | null => nativeAddon().portKey(target);

/** A rule as the user typed it. */
const ruleText = (map: TargetMap) => `--map ${map.text ?? `${map.from}=${map.to}`}`;

/** How much of `rule`'s FROM a target shares (its longest common prefix, or a same port): ranks what it could have meant. */
function likeness(from: string, target: string): number {
  const bare = target.includes(' ') ? target.slice(target.indexOf(' ') + 1) : target;
  let n = 0;
  while (n < from.length && n < bare.length && from[n] === bare[n]) n++;
  const port = (t: string) => (/:(\d+)$/.exec(t) ?? [])[1];
  return n + (port(from) !== undefined && port(from) === port(bare) ? 100 : 0);
}

/**
 * Checks the --map rules against the incidents' recorded targets before anything runs: a
 * rule that maps none of them, one given twice, or one conflicting with an earlier rule (the
 * same FROM to another TO, or every target it covers already mapped by an earlier rule) is a
 * usage error naming the rule and the recorded targets it could have meant.
 */
export function checkMaps(maps: readonly TargetMap[], targets: ReadonlyMap<string, string>): void {
  const key = (m: TargetMap) => `${m.proto ?? ''} ${m.from}`;
  maps.forEach((map, i) => {
    const earlier = maps.slice(0, i).find((m) => key(m) === key(map));
    if (earlier)
      throw new InvalidArgumentError(
        earlier.to === map.to
          ? `${ruleText(map)} is given twice`
          : `${ruleText(map)} conflicts with ${ruleText(earlier)}: one recorded target, two replacements`,
      );
    const covered = [...targets].filter(([target, kind]) => mapTarget(target, kind, [map]) !== target);
    if (covered.length === 0) {
      const candidates = [...targets.keys()]
        .map((t) => ({ t, score: likeness(map.from, t) }))
        .sort((a, b) => b.score - a.score || (a.t < b.t ? -1 : 1))
        .slice(0, 5)
        .map((c) => c.t);
      throw new InvalidArgumentError(
        `${ruleText(map)} matches no recorded target${
          candidates.length > 0 ? `; the incident's targets nearest it: ${candidates.join(', ')}` : ''
        }`,
      );
    }
    const shadowed = covered.every(([target, kind]) => mapTarget(target, kind, maps.slice(0, i)) !== target);
    if (shadowed)
      throw new InvalidArgumentError(
        `${ruleText(map)} conflicts with the rules before it: every target it matches (${covered
          .slice(0, 3)
          .map(([t]) => t)
          .join(', ')}) is already mapped by them`,
      );
  });
}
