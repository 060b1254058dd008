/**
 * --include/--exclude as the kernel applies them: pids and comms go into
 * their maps once; services and cgroup paths resolve to cgroup ids, which
 * change as cgroups come and go (a restarted service gets a new one), so
 * the agent resolves them again every CGROUP_RESCAN_MS.
 */
import type { CaptureOptions, KernelSelector } from '../capture/capture-options';
import { globToRegExp } from '../config/glob';
import type { CgroupPaths } from '../attribution/cgroup-paths';
import type { ServiceResolver } from '../attribution/service-resolver';
import { selectsContainer, type Selector } from './selector';
import type { KernelSelection } from './task-filter';

export interface FilterOptions {
  /** undefined: every task; a list (even empty): only tasks one of them names */
  include?: Selector[];
  exclude: Selector[];
  /** excluded tasks lose their transaction events too */
  filterTransactions: boolean;
}

/** How often services and cgroup paths are resolved to cgroup ids again. */
export const CGROUP_RESCAN_MS = 1000;

export interface CgroupIds {
  include: bigint[];
  exclude: bigint[];
}

type CgroupTest = (path: string) => boolean;

function ancestry(path: string): string[] {
  const out = [path];
  for (let at = path.lastIndexOf('/'); at > 0; at = path.lastIndexOf('/', at - 1))
    out.push(path.slice(0, at));
  if (path !== '/') out.push('/');
  return out;
}

/** A cgroup path selector (`cgroup:PATTERN`) names that cgroup and every one under it. */
export function cgroupPathTest(selectorPath: string): CgroupTest {
  const pattern = globToRegExp(selectorPath);
  return (path) => ancestry(path).some((p) => pattern.test(p));
}

function cgroupTest(selector: Selector, services: ServiceResolver): CgroupTest | null {
  if (selector.kind === 'service') return (path) => services.serviceOfCgroup(path) === selector.name;
  if (selector.kind === 'container' || selector.kind === 'pod' || selector.kind === 'namespace')
    return (path) => selectsContainer(selector, services.containers.containerOf(path));
  return selector.kind === 'cgroup' ? cgroupPathTest(selector.path) : null;
}

export class CgroupSelection {
  private readonly includeTests: CgroupTest[];
  private readonly excludeTests: CgroupTest[];
  private readonly fixed: CgroupIds;
  private last = '';

  constructor(
    private readonly filter: FilterOptions,
    services: ServiceResolver,
    private readonly paths: CgroupPaths,
  ) {
    const tests = (list: Selector[]) => list.map((s) => cgroupTest(s, services)).filter((t) => t !== null);
    this.includeTests = tests(filter.include ?? []);
    this.excludeTests = tests(filter.exclude);
    const ids = (list: Selector[]) => list.flatMap((s) => (s.kind === 'cgroup-id' ? [s.id] : []));
    this.fixed = { include: ids(filter.include ?? []), exclude: ids(filter.exclude) };
  }

  /** Whether any selector resolves through the cgroup tree (then the ids are kept current). */
  get live(): boolean {
    return this.includeTests.length + this.excludeTests.length > 0;
  }

  /** The cgroup ids the selectors name now. */
  resolve(): CgroupIds {
    const out: CgroupIds = { include: [...this.fixed.include], exclude: [...this.fixed.exclude] };
    if (!this.live) return out;
    for (const [id, path] of this.paths.all()) {
      if (this.includeTests.some((t) => t(path))) out.include.push(BigInt(id));
      if (this.excludeTests.some((t) => t(path))) out.exclude.push(BigInt(id));
    }
    return out;
  }

  /** The ids now when they changed since the last call, else null. */
  changed(): CgroupIds | null {
    const ids = this.resolve();
    const key = `${ids.include.join(',')}|${ids.exclude.join(',')}`;
    if (key === this.last) return null;
    this.last = key;
    return ids;
  }

  /** The selectors as the kernel applies them, with these cgroup ids. */
  kernelSelection(ids: CgroupIds): KernelSelection {
    const kernel = (list: Selector[], cgroupIds: bigint[]): KernelSelector[] => [
      ...list.flatMap((s): KernelSelector[] =>
        s.kind === 'pid' ? [{ pid: s.pid }] : s.kind === 'comm' ? [{ comm: s.comm }] : [],
      ),
      ...cgroupIds.map((cgroupId) => ({ cgroupId })),
    ];
    return {
      include: this.filter.include && kernel(this.filter.include, ids.include),
      exclude: kernel(this.filter.exclude, ids.exclude),
    };
  }

  /** The capture options of the filter, with the cgroup ids resolved now. */
  captureOptions(): Pick<CaptureOptions, 'include' | 'exclude' | 'liveCgroups' | 'filterTransactions'> {
    return {
      ...this.kernelSelection(this.changed() ?? this.resolve()),
      liveCgroups: this.live,
      filterTransactions: this.filter.filterTransactions,
    };
  }
}
