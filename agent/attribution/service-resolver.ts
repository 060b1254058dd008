/**
 * Which service an event belongs to: the first config rule that matches the
 * process (all of a rule's conditions must hold), else, in a container, its
 * pod's app.kubernetes.io/name label or the container's name, else its
 * systemd service unit without ".service", else its comm. Resolved once per
 * process and cached until the process changes its comm (exec) or cgroup.
 */
import { globToRegExp } from '../config/glob';
import type { ServiceRule } from '../config/config-schema';
import type { Container } from '../../core/model';
import { CgroupPaths } from './cgroup-paths';
import { ContainerResolver } from './container-resolver';
import { readExePath, readInnermostPid, readProcCgroupPath, serviceUnitOf } from './process-info';

interface CompiledRule {
  service: string;
  unit?: RegExp;
  cgroup?: RegExp;
  comm?: RegExp;
  exe?: RegExp;
}

export interface ProcessFacts {
  pid: number;
  comm: string;
  cgroupId: number;
}

/** A process's service and the container it runs in (null: a host process). */
export interface ProcessIdentity {
  service: string;
  container: Container | null;
}

const MAX_CACHED_PROCESSES = 65536;

/** The name a container gives its processes' service when no rule names it. */
export function containerServiceName(container: Container | null): string | null {
  if (!container) return null;
  const appName = container.labels['app.kubernetes.io/name'];
  return (appName !== undefined && appName !== '' ? appName : null) ?? container.name;
}

export class ServiceResolver {
  private readonly rules: CompiledRule[];
  private readonly cache = new Map<number, { comm: string; cgroupId: number; identity: ProcessIdentity }>();

  constructor(
    rules: ServiceRule[],
    private readonly cgroups = new CgroupPaths(),
    private readonly procRoot = '/proc',
    readonly containers = new ContainerResolver(),
  ) {
    this.rules = rules.map((r) => ({
      service: r.service,
      unit: r.match.unit ? globToRegExp(r.match.unit) : undefined,
      cgroup: r.match.cgroup ? globToRegExp(r.match.cgroup) : undefined,
      comm: r.match.comm ? globToRegExp(r.match.comm) : undefined,
      exe: r.match.exe ? globToRegExp(r.match.exe) : undefined,
    }));
  }

  serviceOf(facts: ProcessFacts): string {
    return this.identityOf(facts).service;
  }

  identityOf(facts: ProcessFacts): ProcessIdentity {
    const cached = this.cache.get(facts.pid);
    if (cached && cached.comm === facts.comm && cached.cgroupId === facts.cgroupId) return cached.identity;
    const identity = this.resolve(facts);
    if (this.cache.size >= MAX_CACHED_PROCESSES) this.cache.clear();
    this.cache.set(facts.pid, { comm: facts.comm, cgroupId: facts.cgroupId, identity });
    return identity;
  }

  /**
   * The service of every process in the cgroup at `cgroupPath`, or null when
   * it depends on the process: a rule on comm or exe could decide it, or
   * the comm would (no systemd unit). The kernel filter selects services by
   * their cgroups with this.
   */
  serviceOfCgroup(cgroupPath: string): string | null {
    const unit = serviceUnitOf(cgroupPath);
    for (const rule of this.rules) {
      if (rule.unit && !(unit && rule.unit.test(unit))) continue;
      if (rule.cgroup && !rule.cgroup.test(cgroupPath)) continue;
      if (rule.comm || rule.exe) return null;
      return rule.service;
    }
    const named = containerServiceName(this.containers.containerOf(cgroupPath));
    return named ?? (unit ? unit.slice(0, -'.service'.length) : null);
  }

  private resolve(facts: ProcessFacts): ProcessIdentity {
    const cgroupPath = readProcCgroupPath(facts.pid, this.procRoot) ?? this.cgroups.pathOf(facts.cgroupId);
    const container = this.containers.containerOf(cgroupPath);
    const service = this.serviceOfProcess(facts, cgroupPath, container);
    if (!container) return { service, container };
    // the process's own pid in the container: kept with its container (one row per container and process)
    const pid = readInnermostPid(facts.pid, this.procRoot);
    return { service, container: pid === null ? container : { ...container, pid } };
  }

  private serviceOfProcess(
    facts: ProcessFacts,
    cgroupPath: string | null,
    container: Container | null,
  ): string {
    const unit = serviceUnitOf(cgroupPath);
    let exe: string | null | undefined;
    for (const rule of this.rules) {
      if (rule.comm && !rule.comm.test(facts.comm)) continue;
      if (rule.unit && !(unit && rule.unit.test(unit))) continue;
      if (rule.cgroup && !(cgroupPath && rule.cgroup.test(cgroupPath))) continue;
      if (rule.exe) {
        if (exe === undefined) exe = readExePath(facts.pid, this.procRoot);
        if (!(exe && rule.exe.test(exe))) continue;
      }
      return rule.service;
    }
    return containerServiceName(container) ?? (unit ? unit.slice(0, -'.service'.length) : facts.comm);
  }
}
