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
import { FRAME_WIDTH, type clockSockets } from './clock-sockets';

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
  /** the sequence number of the last SYNC command done */
  ack: 6,
  controlWords: 7,
  /** Float64s per command: kind, lane, generation, then four of the kind's (see COMMAND) */
  commandWidth: 8,
  /** Float64s per report: kind, lane, generation, then three of the kind's (see REPORT) */
  releaseWidth: 6,
  /** numbers per frame in a lane (see clock-sockets) */
  frameWidth: FRAME_WIDTH,
} as const;

/**
 * What a command asks, and its four fields:
 * AT (deadline, ring offset, length or 0 for no frame, lateness offset, event index),
 * CLEAR (1 to forget the ring too), STOP, RING (the ring is on the port),
 * ATTACH (watcher, fd, from index; its first text is on the port),
 * SEND (watcher or 0 for all; the text is on the port), END (watcher), DETACH (watcher),
 * SYNC (sequence number: stored in `ack` once every earlier command is done).
 */
export const COMMAND = {
  at: 0,
  clear: 1,
  stop: 2,
  ring: 3,
  attach: 4,
  send: 5,
  end: 6,
  detach: 7,
  sync: 8,
} as const;

/** What a report tells: RELEASED (count, releasedAt, writtenAt or -1), CLOSED (watcher, reason). */
export const REPORT = { released: 0, closed: 1 } as const;

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
  /** where rings and texts come from, read only when a command says so */
  port: import('node:worker_threads').MessagePort;
  layout: typeof LAYOUT;
  command: typeof COMMAND;
  report: typeof REPORT;
  sendBuffer: SendBufferLimits;
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

/** A message on the clock's port: a lane's ring, or text for its watchers. */
export type ClockPortMessage = { ring: SharedArrayBuffer } | { text: string };

/** While sockets have bytes waiting, the thread looks at them again at least this often. */
const RETRY_MS = 1;

/* istanbul ignore next: runs in the worker from its source text, where no coverage counters exist */
export function clockThread(
  threads: typeof import('node:worker_threads'),
  os: typeof import('node:os'),
  fs: typeof import('node:fs'),
  sockets: typeof clockSockets,
): void {
  const data = threads.workerData as ClockThreadData;
  const at = data.layout;
  const CMD = data.command;
  const control = new Int32Array(data.control);
  const commands = new Float64Array(data.commands);
  const releases = new Float64Array(data.releases);
  const commandMask = commands.length / at.commandWidth - 1;
  const releaseCapacity = releases.length / at.releaseWidth;
  const port = threads.parentPort!;
  const doorbellByte = new Uint8Array(1);
  const lanes = new Map<
    number,
    { generation: number; deadlines: number[]; frames: number[]; head: number }
  >();
  // performance.now() reads the same monotonic clock as hrtime, in ms, and allocates nothing
  const startNs = Number(process.hrtime.bigint() - data.epochNs);
  const startMs = performance.now();
  const now = () => startNs + (performance.now() - startMs) * 1e6;
  /** reports that did not fit in the ring yet */
  const unsent: number[] = [];
  const out = sockets(fs, data.sendBuffer, now, (lane, watcher, reason) =>
    unsent.push(data.report.closed, lane, 0, watcher, reason, 0),
  );
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
  const message = (): ClockPortMessage => {
    const received = threads.receiveMessageOnPort(data.port);
    if (!received) throw new Error('the replay clock was told of a message that is not there');
    return received.message as ClockPortMessage;
  };

  /** Moves waiting reports into the ring as far as they fit. */
  const post = (): void => {
    const head = Atomics.load(control, at.releaseHead);
    let tail = control[at.releaseTail]!;
    let taken = 0;
    while (taken < unsent.length && ((tail - head) | 0) < releaseCapacity) {
      const slot = (tail & (releaseCapacity - 1)) * at.releaseWidth;
      for (let k = 0; k < at.releaseWidth; k++) releases[slot + k] = unsent[taken + k]!;
      taken += at.releaseWidth;
      tail = (tail + 1) | 0;
    }
    if (taken > 0) unsent.splice(0, taken);
    Atomics.store(control, at.releaseTail, tail);
  };

  const ring = () => {
    if (Atomics.compareExchange(control, at.doorbell, 1, 0) === 1) {
      try {
        fs.writeSync(data.doorbellFd, doorbellByte);
      } catch {
        // EAGAIN: the pipe is full of unread rings, so the main thread wakes anyway
      }
    }
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
      const kind = commands[slot]!;
      const id = commands[slot + 1]!;
      const generation = commands[slot + 2]!;
      const a = commands[slot + 3]!;
      switch (kind) {
        case CMD.stop:
          return 'stop';
        case CMD.at: {
          let lane = lanes.get(id);
          if (!lane || lane.generation !== generation) {
            lane = { generation, deadlines: [], frames: [], head: 0 };
            lanes.set(id, lane);
          }
          lane.deadlines.push(a);
          // the frame: the command's fields after the deadline
          for (let k = 0; k < at.frameWidth; k++) lane.frames.push(commands[slot + 4 + k]!);
          break;
        }
        case CMD.clear:
          lanes.delete(id);
          out.clear(id, a === 1);
          break;
        case CMD.ring: {
          const received = message();
          if ('ring' in received) out.buffer(id, received.ring);
          break;
        }
        case CMD.attach: {
          const received = message();
          out.attach(
            id,
            a,
            commands[slot + 4]!,
            commands[slot + 5]!,
            'text' in received ? received.text : '',
          );
          break;
        }
        case CMD.send: {
          const received = message();
          if ('text' in received) out.send(id, a, received.text);
          break;
        }
        case CMD.end:
          out.end(id, a);
          break;
        case CMD.detach:
          out.detach(id, a);
          break;
        case CMD.sync:
          post();
          Atomics.store(control, at.ack, a);
          Atomics.notify(control, at.ack);
          break;
      }
    }
    Atomics.store(control, at.commandHead, head);
    return 'done';
  };

  /** Writes and hands the main thread what is due at `t`; false when its ring is full. */
  const release = (t: number): boolean => {
    post();
    const head = Atomics.load(control, at.releaseHead);
    let tail = control[at.releaseTail]!;
    let full = unsent.length > 0;
    const releasedAt = Math.round(t);
    for (const [id, lane] of lanes) {
      if (full || ((tail - head) | 0) >= releaseCapacity) {
        full = true;
        break;
      }
      const first = lane.head;
      while (lane.head < lane.deadlines.length && lane.deadlines[lane.head]! <= t) lane.head++;
      if (lane.head === first) continue;
      const deadlines = lane.deadlines;
      const late = (i: number) => Math.max(0, releasedAt - deadlines[i]!);
      const wrote = out.release(id, lane.frames, first, lane.head, late);
      const slot = (tail & (releaseCapacity - 1)) * at.releaseWidth;
      releases[slot] = data.report.released;
      releases[slot + 1] = id;
      releases[slot + 2] = lane.generation;
      releases[slot + 3] = lane.head - first;
      releases[slot + 4] = releasedAt;
      releases[slot + 5] = wrote ? Math.round(now()) : -1;
      tail = (tail + 1) | 0;
      if (lane.head === lane.deadlines.length) lanes.delete(id);
      else if (lane.head >= 1024) {
        lane.deadlines = lane.deadlines.slice(lane.head);
        lane.frames = lane.frames.slice(lane.head * at.frameWidth);
        lane.head = 0;
      }
    }
    Atomics.store(control, at.releaseTail, tail);
    ring();
    return !full;
  };

  for (;;) {
    // read before draining: a command queued after the drain changes it, and the wait returns at once
    const seen = Atomics.load(control, at.wake);
    const drained = drain();
    if (drained === 'stop') return;
    if (out.backlogged) out.retry();
    if (unsent.length > 0) {
      post();
      ring();
    }
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
    const idleMs = out.backlogged || unsent.length > 0 ? RETRY_MS : undefined;
    if (next === undefined) {
      Atomics.wait(control, at.wake, seen, idleMs);
      continue;
    }
    const wakeAt = next - earlyWake;
    const sleep = wakeAt - now();
    if (sleep > 0) {
      const ms = idleMs === undefined ? sleep / 1e6 : Math.min(idleMs, sleep / 1e6);
      if (Atomics.wait(control, at.wake, seen, ms) === 'timed-out' && ms === sleep / 1e6) {
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
