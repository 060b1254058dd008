/**
 * The clock's worker thread, started through clock-thread-main.ts like every
 * thread (core/threads/start-thread). It is handed the modules it uses and
 * reads nothing from outside the function: what it touches while it spins
 * stays in plain view.
 *
 * It sleeps on Atomics.wait until an early-wake margin before the earliest
 * deadline, then spins on hrtime until the deadline. Futex timeouts
 * overshoot by the timer slack (~50 µs, none under SCHED_FIFO) plus the
 * wake-up latency, which depends on the load: the margin follows the
 * overshoots it sees (up at once, down slowly) within fixed bounds, so the
 * spin covers a late wake-up and waiting stays nearly free.
 *
 * Deadlines come in, and releases go out, through rings in shared memory,
 * and the main thread's event loop is woken by a byte on a pipe, sent when
 * it has read every release before: the real-time clock thread must not
 * take a lock the main thread also takes (a message port's), since a main
 * thread preempted while holding it would stall the clock for a scheduler
 * slice. The one message is the hello at start.
 */

/** Where things are in the shared buffers; handed to the thread with its data. */
export const LAYOUT = {
  /** Int32 words of the control buffer: */
  /** bumped by the main thread after queueing commands */
  wake: 0,
  commandHead: 1,
  commandTail: 2,
  releaseHead: 3,
  releaseTail: 4,
  /** 1 while the main thread wants a doorbell for the next release */
  doorbell: 5,
  controlWords: 6,
  /** Float64s per command: lane, generation, deadline */
  commandWidth: 3,
  /** Float64s per release: lane, generation, count, releasedAt */
  releaseWidth: 4,
  /** as a command's deadline: forget the lane; as its lane: stop the thread */
  none: -1,
} as const;

/** What the thread tells the main thread once, before anything else. */
export interface ClockThreadHello {
  tid: number;
  /** its nice value after trying to raise it */
  niceness: number;
}

export interface ClockThreadData {
  control: SharedArrayBuffer;
  /** a power of two of commands */
  commands: SharedArrayBuffer;
  /** a power of two of releases */
  releases: SharedArrayBuffer;
  /** write end of the doorbell pipe (non-blocking) */
  doorbellFd: number;
  layout: typeof LAYOUT;
  /**
   * Times in the thread are nanoseconds since this monotonic instant, as
   * doubles: exact for 104 days, and unlike bigints they cost no allocation,
   * so the thread never pauses to collect garbage in the middle of a burst.
   */
  epochNs: bigint;
  /** the early-wake margin: where it starts, and its bounds */
  earlyWakeNs: number;
  minEarlyWakeNs: number;
  maxEarlyWakeNs: number;
  /** nice value for this thread (0: leave it) */
  niceness: number;
}

/* istanbul ignore next: runs in the worker from its source text, where no coverage counters exist */
export function clockThread(
  threads: typeof import('node:worker_threads'),
  os: typeof import('node:os'),
  fs: typeof import('node:fs'),
): void {
  const data = threads.workerData as ClockThreadData;
  const at = data.layout;
  const control = new Int32Array(data.control);
  const commands = new Float64Array(data.commands);
  const releases = new Float64Array(data.releases);
  const commandMask = commands.length / at.commandWidth - 1;
  const releaseCapacity = releases.length / at.releaseWidth;
  const port = threads.parentPort!;
  const doorbellByte = new Uint8Array(1);
  const lanes = new Map<number, { generation: number; deadlines: number[]; head: number }>();
  // performance.now() reads the same monotonic clock as hrtime, in ms, and allocates nothing
  const startNs = Number(process.hrtime.bigint() - data.epochNs);
  const startMs = performance.now();
  const now = () => startNs + (performance.now() - startMs) * 1e6;
  if (data.niceness !== 0) {
    try {
      // on Linux a nice value is per thread: this raises the clock only
      os.setPriority(data.niceness);
    } catch {
      // not permitted: the clock runs at the daemon's priority
    }
  }
  // "<pid>/task/<tid>": the main thread may raise this thread's scheduling class by its id
  const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
  port.postMessage({ tid, niceness: os.getPriority() });
  let earlyWake = data.earlyWakeNs;
  /** decaying maximum of the recent wake-up overshoots */
  let overshoot = 0;
  /** the margin: half as much again as the overshoot, within its bounds */
  const adaptEarlyWake = () => {
    const margin = overshoot * 1.5;
    earlyWake =
      margin < data.minEarlyWakeNs
        ? data.minEarlyWakeNs
        : margin > data.maxEarlyWakeNs
          ? data.maxEarlyWakeNs
          : margin;
  };

  /**
   * Applies up to DRAIN_BATCH queued commands: 'stop' once told to stop,
   * 'more' when commands remain. A session starting a dense replay queues
   * thousands at once, and releasing what is due must not wait for them all.
   */
  const DRAIN_BATCH = 256;
  const drain = (): 'stop' | 'more' | 'done' => {
    const tail = Atomics.load(control, at.commandTail);
    let head = control[at.commandHead]!;
    for (let taken = 0; head !== tail; head = (head + 1) | 0, taken++) {
      if (taken === DRAIN_BATCH) {
        Atomics.store(control, at.commandHead, head);
        return 'more';
      }
      const slot = (head & commandMask) * at.commandWidth;
      if (commands[slot] === at.none) return 'stop';
      const id = commands[slot]!;
      const generation = commands[slot + 1]!;
      const deadline = commands[slot + 2]!;
      if (deadline === at.none) {
        lanes.delete(id);
        continue;
      }
      let lane = lanes.get(id);
      if (!lane || lane.generation !== generation) {
        lane = { generation, deadlines: [], head: 0 };
        lanes.set(id, lane);
      }
      lane.deadlines.push(deadline);
    }
    Atomics.store(control, at.commandHead, head);
    return 'done';
  };

  /** Hands the main thread what is due at `t`; false when its ring is full. */
  const release = (t: number): boolean => {
    const head = Atomics.load(control, at.releaseHead);
    let tail = control[at.releaseTail]!;
    let full = false;
    for (const [id, lane] of lanes) {
      if (((tail - head) | 0) >= releaseCapacity) {
        full = true;
        break;
      }
      const first = lane.head;
      while (lane.head < lane.deadlines.length && lane.deadlines[lane.head]! <= t) lane.head++;
      if (lane.head === first) continue;
      const slot = (tail & (releaseCapacity - 1)) * at.releaseWidth;
      releases[slot] = id;
      releases[slot + 1] = lane.generation;
      releases[slot + 2] = lane.head - first;
      releases[slot + 3] = t;
      tail = (tail + 1) | 0;
      if (lane.head === lane.deadlines.length) lanes.delete(id);
      else if (lane.head >= 1024) {
        lane.deadlines = lane.deadlines.slice(lane.head);
        lane.head = 0;
      }
    }
    Atomics.store(control, at.releaseTail, tail);
    if (Atomics.compareExchange(control, at.doorbell, 1, 0) === 1) {
      try {
        fs.writeSync(data.doorbellFd, doorbellByte);
      } catch {
        // EAGAIN: the pipe is full of unread rings, so the main thread wakes anyway
      }
    }
    return !full;
  };

  for (;;) {
    // read before draining: a command queued after the drain changes it, and the wait returns at once
    const seen = Atomics.load(control, at.wake);
    const drained = drain();
    if (drained === 'stop') return;
    let next: number | undefined;
    for (const lane of lanes.values()) {
      const deadline = lane.deadlines[lane.head]!;
      if (next === undefined || deadline < next) next = deadline;
    }
    if (drained === 'more') {
      // between batches of commands: release what is due, never wait
      const t = now();
      if (next !== undefined && next <= t) release(t);
      continue;
    }
    if (next === undefined) {
      Atomics.wait(control, at.wake, seen);
      continue;
    }
    const wakeAt = next - earlyWake;
    const sleep = wakeAt - now();
    if (sleep > 0) {
      if (Atomics.wait(control, at.wake, seen, Number(sleep) / 1e6) === 'timed-out') {
        const over = now() - wakeAt;
        overshoot = over > overshoot ? over : overshoot - (overshoot - over) / 32;
        adaptEarlyWake();
      }
      continue;
    }
    let t = now();
    while (t < next && Atomics.load(control, at.wake) === seen) t = now();
    if (t < next) continue; // new commands may bring an earlier deadline
    // a full ring means a main thread far behind: give it a millisecond rather than spin
    if (!release(t)) Atomics.wait(control, at.wake, seen, 1);
    // dense deadlines leave no timed waits to learn from: let one late wake-up fade, or the
    // thread would spin without pause, and the kernel parks a real-time thread that never sleeps
    overshoot -= overshoot / 64;
    adaptEarlyWake();
  }
}
