/**
 * --include/--exclude for one process in user space, as current_wanted (bpf/capture/maps.h) decides
 * in the kernel from the same selectors: an exclusion wins, then one include must match when
 * includes are in force. For what the agent does to processes beyond capturing them (the Python hook
 * is queued only into processes the capture includes).
 */
import type { KernelSelector } from '../capture/capture-options';

export interface TaskFacts {
  /** the process (tgid) */
  pid: number;
  comm: string;
  /** its cgroup v2 id, null when unknown (then no cgroup selector matches it) */
  cgroupId: bigint | null;
}

/** The selectors in force: undefined include means every task. */
export interface KernelFilter {
  include?: KernelSelector[];
  exclude: KernelSelector[];
}

function names(task: TaskFacts, selector: KernelSelector): boolean {
  if ('pid' in selector) return selector.pid === task.pid;
  if ('comm' in selector) return selector.comm === task.comm;
  return task.cgroupId !== null && selector.cgroupId === task.cgroupId;
}

export function taskWanted(task: TaskFacts, filter: KernelFilter): boolean {
  if (filter.exclude.some((s) => names(task, s))) return false;
  return filter.include === undefined || filter.include.some((s) => names(task, s));
}
