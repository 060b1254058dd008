/**
 * What the scheduler gives each thread of a process, as /proc shows it:
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

export interface ThreadPriority {
  /** /proc/PID/task/TID/comm, without its newline */
  name: string;
  /** 0 SCHED_OTHER, 1 SCHED_FIFO, 5 SCHED_IDLE */
  policy: number;
  nice: number;
  rtPriority: number;
}

/** Each thread's name, policy, nice value and real-time priority (/proc/PID/task/TID/stat), by thread id. */
export function threadPriorities(pid: number): Map<number, ThreadPriority> {
  const threads = new Map<number, ThreadPriority>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue;
    }
    // the name may hold spaces and parentheses: the fields after it start at the last ')'
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    threads.set(Number(tid), {
      name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
      nice: Number(fields[16]),
      rtPriority: Number(fields[37]),
      policy: Number(fields[38]),
    });
  }
  return threads;
}
