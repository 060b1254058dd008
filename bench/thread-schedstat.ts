/**
 * A thread's time on a CPU and waiting for one, as the scheduler counts it
 * (/proc/PID/task/TID/schedstat: ns run, ns waited on a run queue, times
 * run): what the replay benches use to tell a client that worked late from
 * one that waited for a core (issue 48).
 */
import { readFileSync } from 'node:fs';

export interface SchedStat {
  runNs: number;
  waitNs: number;
  /** times the thread was put on a CPU */
  slices: number;
}

/** Thread `tid` of process `pid` (the main thread: tid = pid); null once it has exited. */
export function schedStat(pid: number, tid = pid): SchedStat | null {
  try {
    const [run, wait, slices] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ');
    return { runNs: Number(run), waitNs: Number(wait), slices: Number(slices) };
  } catch {
    return null;
  }
}

/** What a thread did between two readings. */
export function schedSince(before: SchedStat, after: SchedStat): SchedStat {
  return {
    runNs: after.runNs - before.runNs,
    waitNs: after.waitNs - before.waitNs,
    slices: after.slices - before.slices,
  };
}
