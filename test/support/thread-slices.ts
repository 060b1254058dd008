/**
 * What the fair scheduler gives each thread of a process, as /proc shows it:
 * the tests of the threads that ask for its shortest slice (the replay
 * supervisor, the CLI's stream reader, the daemon's replay clock) read it from
 * the running process.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** The fair scheduler's shortest slice (native/thread_scheduling.h kShortestSliceNs). */
export const SHORTEST_SLICE_NS = 100_000;

/** `se.slice` (ns) of each thread of process `pid` by thread id; a thread that ended meanwhile is left out. */
export function threadSlices(pid: number): Map<number, number> {
  const slices = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let sched: string;
    try {
      sched = readFileSync(`/proc/${pid}/task/${tid}/sched`, 'utf8');
    } catch {
      continue;
    }
    slices.set(Number(tid), Number(/^se\.slice\s*:\s*(\d+)/m.exec(sched)?.[1]));
  }
  return slices;
}
