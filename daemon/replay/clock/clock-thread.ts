/**
 * The clock's worker thread, started through clock-thread-main.ts like every
 * thread (core/threads/start-thread). It is handed the modules it uses and
 * reads nothing from outside the function: what it touches while it spins
 * stays in plain view.
 *
 * It sleeps on Atomics.wait until an early-wake margin before the earliest
 * deadline (early-wake.ts), then spins on hrtime until the deadline. What it
 * does between waits (commands, releases, reports) is ClockCore's.
 *
 * Deadlines come in, and releases go out, through rings in shared memory
 * (their layout is clock-wire.ts's),
 * and the main thread's event loop is woken by a byte on a pipe, sent when
 * it has read every release before: the real-time clock thread must not
 * take a lock the main thread also takes (a message port's) while it holds
 * deadlines, since a main thread preempted while holding it would stall the
 * clock for a scheduler slice. Messages carry only what is rare: the hello
 * at start, a lane's ring, the text of a state event or heartbeat.
 *
 * A released deadline that carries a frame is written by this thread to the
 * lane's stream sockets at once (clock-sockets.ts), so replay delivery does
 * not wait for a main thread busy with queries.
 */

import type { SendBufferLimits } from '../send-buffer';
import { ClockCore } from './clock-core';
import { warmRelease } from './clock-warm';
import type { clockSockets } from './clock-sockets';
import { CONTROL, clockRings, type ClockPortMessage } from './clock-wire';
import { EarlyWake, type EarlyWakeBounds } from './early-wake';

/** What the thread tells the main thread once, before anything else. */
export interface ClockThreadHello {
  tid: number;
  /** its nice value after trying to raise it */
  niceness: number;
}

export interface ClockThreadData extends EarlyWakeBounds {
  /** CONTROL_WORDS Int32s */
  control: SharedArrayBuffer;
  /** a power of two of commands */
  commands: SharedArrayBuffer;
  /** a power of two of reports */
  reports: SharedArrayBuffer;
  /** write end of the doorbell pipe (non-blocking) */
  doorbellFd: number;
  /** where rings and texts come from, read only when a command says so */
  port: import('node:worker_threads').MessagePort;
  sendBuffer: SendBufferLimits;
  /**
   * Times in the thread are nanoseconds since this monotonic instant, as
   * doubles: exact for 104 days, and unlike bigints they cost no allocation,
   * so the thread never pauses to collect garbage in the middle of a burst.
   */
  epochNs: bigint;
  /** nice value for this thread (0: leave it) */
  niceness: number;
}

/** While sockets or reports wait for room, the thread looks at them again at least this often. */
const RETRY_MS = 1;

/* istanbul ignore next: runs in the worker, where no coverage counters exist; ClockCore holds the logic */
export function clockThread(
  threads: typeof import('node:worker_threads'),
  os: typeof import('node:os'),
  fs: typeof import('node:fs'),
  sockets: typeof clockSockets,
): void {
  const data = threads.workerData as ClockThreadData;
  const rings = clockRings(data);
  const control = rings.control;
  const doorbellByte = new Uint8Array(1);
  // performance.now() reads the same monotonic clock as hrtime, in ms, and allocates nothing
  const startNs = Number(process.hrtime.bigint() - data.epochNs);
  const startMs = performance.now();
  const now = () => startNs + (performance.now() - startMs) * 1e6;
  const laneSockets = (reportClosed: Parameters<typeof sockets>[3]) =>
    sockets(fs, data.sendBuffer, now, reportClosed);
  const core = new ClockCore({
    ...rings,
    sockets: laneSockets,
    message: () => {
      const received = threads.receiveMessageOnPort(data.port);
      if (!received) throw new Error('the replay clock was told of a message that is not there');
      return received.message as ClockPortMessage;
    },
    ringDoorbell: () => {
      try {
        fs.writeSync(data.doorbellFd, doorbellByte);
      } catch {
        // EAGAIN: the pipe is full of unread rings, so the main thread wakes anyway
      }
    },
    now,
  });
  if (data.niceness !== 0) {
    try {
      // on Linux a nice value is per thread: this raises the clock only
      os.setPriority(data.niceness);
    } catch {
      // not permitted: the clock runs at the daemon's priority
    }
  }
  // compiled before the first play, not while its first event is due
  let devNull = -1;
  try {
    devNull = fs.openSync('/dev/null', 'w');
  } catch {
    // no /dev/null (a bare container): the first play compiles the path as it plays
  }
  if (devNull >= 0)
    try {
      warmRelease({ sockets: laneSockets, now }, devNull);
    } finally {
      fs.closeSync(devNull);
    }
  // "<pid>/task/<tid>": the main thread may raise this thread's scheduling class by its id
  const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
  threads.parentPort!.postMessage({ tid, niceness: os.getPriority() } satisfies ClockThreadHello);
  const earlyWake = new EarlyWake(data);
  let lastReleaseAt = -Infinity;

  for (;;) {
    // read before draining: a command queued after the drain changes it, and the wait returns at once
    const seen = Atomics.load(control, CONTROL.wake);
    const drained = core.drain();
    if (drained === 'stop') return;
    core.retry();
    const next = core.next();
    if (drained === 'more') {
      // between batches of commands: release what is due, never wait
      const t = now();
      if (next !== undefined && next <= t) core.release(t);
      continue;
    }
    const idleMs = core.backlogged ? RETRY_MS : undefined;
    if (next === undefined) {
      Atomics.wait(control, CONTROL.wake, seen, idleMs);
      continue;
    }
    const wakeAt = earlyWake.wakeAt(next, lastReleaseAt);
    const sleep = wakeAt - now();
    if (sleep > 0) {
      const ms = idleMs === undefined ? sleep / 1e6 : Math.min(idleMs, sleep / 1e6);
      // only a sleep meant to end at the margin tells how late wake-ups are
      if (
        Atomics.wait(control, CONTROL.wake, seen, ms) === 'timed-out' &&
        ms === sleep / 1e6 &&
        wakeAt < next
      )
        earlyWake.woke(now() - wakeAt);
      continue;
    }
    let t = now();
    while (t < next && Atomics.load(control, CONTROL.wake) === seen) t = now();
    if (t < next) continue; // new commands may bring an earlier deadline
    // a dense look may come after several deadlines: they go out together
    // a full report ring (a main thread far behind) holds no release back: the clock counts
    // them and reports once there is room (core.backlogged keeps it looking meanwhile)
    core.release(t);
    lastReleaseAt = t;
    earlyWake.fade();
  }
}
