/**
 * What --include/--exclude name (flags and the config file's `capture:`
 * section): `service:NAME`, `cgroup:PATH` (the cgroup and those under it;
 * `*` and `?` as in config rules), `comm:NAME` (exact), `pid:N`,
 * `cgroup-id:N`. The one parser of that syntax and of `--sample-background`.
 */
import { COMM_LEN } from '../../core/model';
import { KreplayError } from '../../core/errors';

export type Selector =
  | { kind: 'service'; name: string }
  | { kind: 'cgroup'; path: string }
  | { kind: 'comm'; comm: string }
  | { kind: 'pid'; pid: number }
  | { kind: 'cgroup-id'; id: bigint };

export class SelectorError extends KreplayError {
  constructor(message: string) {
    super('E_FILTER', message);
  }
}

const KINDS = 'service:NAME, cgroup:PATH, comm:NAME, pid:N or cgroup-id:N';
const MAX_PID = 4_194_304;

export function parseSelector(text: string): Selector {
  const colon = text.indexOf(':');
  const kind = colon < 0 ? '' : text.slice(0, colon);
  const value = text.slice(colon + 1);
  if (colon < 0 || value === '') throw new SelectorError(`"${text}" is not a filter: expected ${KINDS}`);
  switch (kind) {
    case 'service':
      return { kind, name: value };
    case 'cgroup':
      if (!value.startsWith('/'))
        throw new SelectorError(`"${text}": a cgroup path starts with / (as in /proc/PID/cgroup)`);
      return { kind, path: value.length > 1 ? value.replace(/\/+$/, '') : value };
    case 'comm':
      if (Buffer.byteLength(value) > COMM_LEN - 1 || value.includes('\0'))
        throw new SelectorError(
          `"${text}": a comm is at most ${COMM_LEN - 1} bytes (the kernel cuts longer names)`,
        );
      return { kind, comm: value };
    case 'pid': {
      const pid = /^\d+$/.test(value) ? Number(value) : NaN;
      if (!(pid >= 1 && pid <= MAX_PID))
        throw new SelectorError(`"${text}": expected a pid from 1 to ${MAX_PID}`);
      return { kind, pid };
    }
    case 'cgroup-id': {
      const id = /^\d+$/.test(value) ? BigInt(value) : -1n;
      if (id < 1n || id >= 2n ** 64n)
        throw new SelectorError(`"${text}": expected a cgroup v2 id (the directory's inode number)`);
      return { kind, id };
    }
    default:
      throw new SelectorError(`"${text}": unknown filter kind "${kind}", expected ${KINDS}`);
  }
}

export function formatSelector(s: Selector): string {
  switch (s.kind) {
    case 'service':
      return `service:${s.name}`;
    case 'cgroup':
      return `cgroup:${s.path}`;
    case 'comm':
      return `comm:${s.comm}`;
    case 'pid':
      return `pid:${s.pid}`;
    case 'cgroup-id':
      return `cgroup-id:${s.id}`;
  }
}

/** The filter as the run records it (runs.filter), null when everything is captured. */
export function describeFilter(f: {
  include?: Selector[];
  exclude: Selector[];
  filterTransactions: boolean;
}): string | null {
  if (f.include === undefined && f.exclude.length === 0) return null;
  return JSON.stringify({
    include: f.include?.map(formatSelector) ?? null,
    exclude: f.exclude.map(formatSelector),
    filter_transactions: f.filterTransactions,
  });
}

/** `1/N` (or `N`): keep one in N background writes; `1/1` keeps all. */
export function parseSampleRate(text: string): number {
  const match = /^(?:1\/)?(\d+)$/.exec(text.trim());
  const n = match ? Number(match[1]) : NaN;
  if (!(Number.isSafeInteger(n) && n >= 1 && n <= MAX_SAMPLE_ONE_IN))
    throw new SelectorError(
      `"${text}" is not a sampling rate: expected 1/N with N from 1 to ${MAX_SAMPLE_ONE_IN}`,
    );
  return n;
}

/** The largest N of --sample-background 1/N. */
export const MAX_SAMPLE_ONE_IN = 1_000_000;
