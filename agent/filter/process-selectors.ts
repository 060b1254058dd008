/**
 * Selectors (selector.ts) matched against a live process in user space, read from /proc: what
 * --hook-include/--hook-exclude decide for the runtime hooks. The same meaning as the capture's
 * kernel filter (a cgroup selector names the cgroup and those under it; comm exact), with the
 * process's own service (its comm and executable rules too) and its executable besides.
 */
import { readFileSync, realpathSync } from 'node:fs';
import type { CgroupPaths } from '../attribution/cgroup-paths';
import { readExePath, readProcCgroupPaths } from '../attribution/process-info';
import type { ServiceResolver } from '../attribution/service-resolver';
import { globToRegExp } from '../config/glob';
import { cgroupPathTest } from './capture-filter';
import { selectsContainer, type Selector } from './selector';
import type { Container } from '../../core/model';

/** What the selectors read of a process. */
export interface SelectedProcess {
  pid: number;
  comm: string;
  /** its cgroup paths (/proc/PID/cgroup: the unified one, and systemd's on a hybrid host) */
  cgroupPaths: string[];
  cgroupId: bigint | null;
  /** /proc/PID/exe's target, null when unreadable */
  exe: string | null;
  service: string;
  /** the container it runs in, null for a host process */
  container: Container | null;
}

type Test = (p: SelectedProcess) => boolean;

/** `exe:PATH`: its pattern, or without `*`/`?` the file itself under any name it has (a symlink: /usr/bin/python3). */
function exeTest(path: string): Test {
  const pattern = globToRegExp(path);
  let real: string | null = null;
  if (!/[*?]/.test(path))
    try {
      real = realpathSync(path);
    } catch {
      // not on this host (yet): its pattern still names it
    }
  return (p) => p.exe !== null && (pattern.test(p.exe) || p.exe === real);
}

function test(selector: Selector): Test {
  switch (selector.kind) {
    case 'service':
      return (p) => p.service === selector.name;
    case 'cgroup': {
      const names = cgroupPathTest(selector.path);
      return (p) => p.cgroupPaths.some(names);
    }
    case 'comm':
      return (p) => p.comm === selector.comm;
    case 'pid':
      return (p) => p.pid === selector.pid;
    case 'cgroup-id':
      return (p) => p.cgroupId === selector.id;
    case 'exe':
      return exeTest(selector.path);
    case 'container':
    case 'pod':
    case 'namespace':
      return (p) => selectsContainer(selector, p.container);
  }
}

/** Which of `selectors` names a process first. */
export class ProcessSelectors {
  private readonly tests: { selector: Selector; names: Test }[];

  constructor(selectors: readonly Selector[]) {
    this.tests = selectors.map((selector) => ({ selector, names: test(selector) }));
  }

  get empty(): boolean {
    return this.tests.length === 0;
  }

  /** The first selector that names the process, or undefined. */
  naming(p: SelectedProcess): Selector | undefined {
    return this.tests.find((t) => t.names(p))?.selector;
  }
}

/** A live process as the selectors read it; null when it is gone. */
export function readSelectedProcess(
  pid: number,
  services: Pick<ServiceResolver, 'identityOf'>,
  cgroups: Pick<CgroupPaths, 'idOfProcess'>,
): SelectedProcess | null {
  let comm: string;
  try {
    comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trimEnd();
  } catch {
    return null;
  }
  const paths = readProcCgroupPaths(pid);
  const cgroupId = cgroups.idOfProcess(pid);
  const { service, container } = services.identityOf({ pid, comm, cgroupId: Number(cgroupId ?? 0n) });
  return {
    pid,
    comm,
    cgroupPaths: [paths?.unified, paths?.systemd].filter((p): p is string => typeof p === 'string'),
    cgroupId,
    exe: readExePath(pid),
    service,
    container,
  };
}
