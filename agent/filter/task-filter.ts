/**
 * The kernel filter's verdict on one process, in user space (what current_wanted in
 * bpf/capture/maps.h decides per task): an exclusion wins, then, when includes are in force, one
 * must name the process by pid, comm or cgroup id. For what the agent does to processes beside
 * capturing them (the Node hook goes only into processes the filters include).
 */
import type { KernelSelector } from '../capture/capture-options';

export interface TaskIdentity {
  pid: number;
  comm: string;
  /** its cgroup v2 id (the directory's inode); null when unknown */
  cgroupId: bigint | null;
}

export interface KernelSelection {
  /** undefined: every task */
  include?: KernelSelector[];
  exclude: KernelSelector[];
}

function names(selector: KernelSelector, task: TaskIdentity): boolean {
  if ('pid' in selector) return selector.pid === task.pid;
  if ('comm' in selector) return selector.comm === task.comm;
  return selector.cgroupId === task.cgroupId;
}

export function selectionWants(selection: KernelSelection, task: TaskIdentity): boolean {
  if (selection.exclude.some((s) => names(s, task))) return false;
  return selection.include === undefined || selection.include.some((s) => names(s, task));
}
