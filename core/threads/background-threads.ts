/**
 * The V8 platform's threads of a process whose main thread is on an event
 * path (the daemon, `kreplay replay`'s stream reader) run behind it, at the
 * lowest weight of the fair scheduler. On 2 cores, a sparse play's late
 * events waited for a core behind the daemon's and the CLI's own V8 workers
 * (optimising compiles, concurrent marking and sweeping: issue 48). Nice 19,
 * not SCHED_IDLE: a busy host still gives them a share, so a collection's
 * background marking and a compile still finish (bench/RESULTS.md, issue 48,
 * prio48). Raising one's own threads' nice value needs no privilege, and
 * each thread's is its own on Linux (setpriority on a thread id).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import type { Logger } from '../log/logger';

/**
 * What Node 24 names V8's platform threads (/proc/PID/task/TID/comm, cut at
 * 15 characters): its workers, and the one that posts their delayed tasks.
 * Not libuv's pool, the inspector's signal thread nor a JS worker thread:
 * those serve a request or do nothing.
 */
export const BACKGROUND_THREADS: readonly string[] = ['V8Worker', 'DelayedTaskSche'];

/** The fair scheduler's lowest weight (15 against nice 0's 1024). */
export const BACKGROUND_NICE = 19;

export interface NamedThread {
  tid: number;
  /** its name as /proc/PID/task/TID/comm reads, newline included */
  comm: string;
}

/** The thread ids among `threads` that run behind the event path. */
export function backgroundThreads(threads: readonly NamedThread[]): number[] {
  return threads
    .filter((thread) => BACKGROUND_THREADS.includes(thread.comm.trim()))
    .map((thread) => thread.tid);
}

/** This process's threads by name; one that ended meanwhile is left out. */
function ownThreads(): NamedThread[] {
  const threads: NamedThread[] = [];
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      threads.push({ tid: Number(tid), comm: readFileSync(`/proc/self/task/${tid}/comm`, 'utf8') });
    } catch {
      // ended since the listing
    }
  }
  return threads;
}

/**
 * Puts this process's V8 platform threads at BACKGROUND_NICE, for the
 * process's life: they start with it and none starts later. Said once at
 * debug level; a thread the kernel refuses keeps its weight (said too).
 */
export function lowerBackgroundThreads(log: Logger): void {
  const lowered: number[] = [];
  for (const tid of backgroundThreads(ownThreads())) {
    try {
      setPriority(tid, BACKGROUND_NICE);
      lowered.push(tid);
    } catch (err) {
      log.debug('a V8 background thread keeps its weight', { thread: tid, error: (err as Error).message });
    }
  }
  log.debug(`V8's background threads run at nice ${BACKGROUND_NICE}`, { threads: lowered.join(',') });
}
