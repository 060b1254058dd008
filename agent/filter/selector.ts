/**
 * What --include/--exclude and --hook-include/--hook-exclude name (flags and
 * the config file's `capture:` section): `service:NAME`, `cgroup:PATH` (the
 * cgroup and those under it; `*` and `?` as in config rules), `comm:NAME`
 * (exact), `pid:N`, `cgroup-id:N`, `container:NAME` (a container by name, id
 * or id prefix), `pod:NAME` and `namespace:NAME` (Kubernetes', exact), and
 * for the hooks only `exe:PATH` (the executable; `*` and `?` too; the kernel
 * filter cannot tell executables). The one parser of that syntax and of
 * `--sample-background`, and the one matcher of the container kinds.
 */
import { COMM_LEN, namesContainer, type Container } from '../../core/model';
import { KreplayError } from '../../core/errors';

export type Selector =
  | { kind: 'service'; name: string }
  | { kind: 'cgroup'; path: string }
  | { kind: 'comm'; comm: string }
  | { kind: 'pid'; pid: number }
  | { kind: 'cgroup-id'; id: bigint }
  | { kind: 'exe'; path: string }
  | { kind: 'container' | 'pod' | 'namespace'; name: string };

export type SelectorKind = Selector['kind'];

export class SelectorError extends KreplayError {
  constructor(message: string) {
    super('E_FILTER', message);
  }
}

const KIND_FORMS: Record<SelectorKind, string> = {
  service: 'service:NAME',
  cgroup: 'cgroup:PATH',
  comm: 'comm:NAME',
  pid: 'pid:N',
  'cgroup-id': 'cgroup-id:N',
  exe: 'exe:PATH',
  container: 'container:NAME',
  pod: 'pod:NAME',
  namespace: 'namespace:NAME',
};
/** What the capture's kernel filter can select (--include/--exclude). */
export const CAPTURE_KINDS: readonly SelectorKind[] = [
  'service',
  'cgroup',
  'comm',
  'pid',
  'cgroup-id',
  'container',
  'pod',
  'namespace',
];
/** What the runtime hooks' scope can select (--hook-include/--hook-exclude): the process is read in /proc. */
export const HOOK_KINDS: readonly SelectorKind[] = [...CAPTURE_KINDS, 'exe'];
const MAX_PID = 4_194_304;

function expected(kinds: readonly SelectorKind[]): string {
  const forms = kinds.map((k) => KIND_FORMS[k]);
  return `${forms.slice(0, -1).join(', ')} or ${forms[forms.length - 1]}`;
}

/** A capture selector (--include/--exclude). */
export function parseSelector(text: string): Selector {
  return parseSelectorOf(text, CAPTURE_KINDS, 'filter');
}

/** A runtime hook selector (--hook-include/--hook-exclude). */
export function parseHookSelector(text: string): Selector {
  return parseSelectorOf(text, HOOK_KINDS, 'hook selector');
}

function parseSelectorOf(text: string, kinds: readonly SelectorKind[], what: string): Selector {
  const colon = text.indexOf(':');
  const kind = colon < 0 ? '' : text.slice(0, colon);
  const value = text.slice(colon + 1);
  const forms = expected(kinds);
  if (colon < 0 || value === '') throw new SelectorError(`"${text}" is not a ${what}: expected ${forms}`);
  if (!(kinds as readonly string[]).includes(kind))
    throw new SelectorError(
      Object.hasOwn(KIND_FORMS, kind)
        ? `"${text}": a ${what} cannot select by ${kind}, expected ${forms}`
        : `"${text}": unknown ${what} kind "${kind}", expected ${forms}`,
    );
  switch (kind as SelectorKind) {
    case 'service':
      return { kind: 'service', name: value };
    case 'cgroup':
      if (!value.startsWith('/'))
        throw new SelectorError(`"${text}": a cgroup path starts with / (as in /proc/PID/cgroup)`);
      return { kind: 'cgroup', path: value.length > 1 ? value.replace(/\/+$/, '') : value };
    case 'comm':
      if (Buffer.byteLength(value) > COMM_LEN - 1 || value.includes('\0'))
        throw new SelectorError(
          `"${text}": a comm is at most ${COMM_LEN - 1} bytes (the kernel cuts longer names)`,
        );
      return { kind: 'comm', comm: value };
    case 'pid': {
      const pid = /^\d+$/.test(value) ? Number(value) : NaN;
      if (!(pid >= 1 && pid <= MAX_PID))
        throw new SelectorError(`"${text}": expected a pid from 1 to ${MAX_PID}`);
      return { kind: 'pid', pid };
    }
    case 'cgroup-id': {
      const id = /^\d+$/.test(value) ? BigInt(value) : -1n;
      if (id < 1n || id >= 2n ** 64n)
        throw new SelectorError(`"${text}": expected a cgroup v2 id (the directory's inode number)`);
      return { kind: 'cgroup-id', id };
    }
    case 'container':
    case 'pod':
    case 'namespace':
      return { kind: kind as 'container' | 'pod' | 'namespace', name: value };
    case 'exe':
      if (!value.startsWith('/'))
        throw new SelectorError(`"${text}": an executable is an absolute path (as /proc/PID/exe names it)`);
      return { kind: 'exe', path: value };
  }
  throw new SelectorError(`"${text}": unknown ${what} kind "${kind}", expected ${forms}`);
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
    case 'exe':
      return `exe:${s.path}`;
    case 'container':
    case 'pod':
    case 'namespace':
      return `${s.kind}:${s.name}`;
  }
}

/** Whether a container, pod or namespace selector names a process in `container` (null: none names a host process). */
export function selectsContainer(
  s: Extract<Selector, { kind: 'container' | 'pod' | 'namespace' }>,
  container: Container | null,
): boolean {
  if (!container) return false;
  if (s.kind === 'container') return namesContainer(s.name, container);
  return (s.kind === 'pod' ? container.pod : container.namespace) === s.name;
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
