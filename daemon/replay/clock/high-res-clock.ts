/**
 * The high-resolution clock: one worker thread holds the deadlines of every
 * session and releases them on time (see clock-thread.ts); releases run on
 * the main thread, so HTTP is never blocked by waiting.
 *
 * One worker for all sessions, not one per session: on a 2-core machine 64
 * spinning threads would take turns on the cores and miss each other's
 * deadlines, while one thread serves the earliest deadline of all sessions
 * and costs nothing while it sleeps.
 */
import { once } from 'node:events';
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import type { Worker } from 'node:worker_threads';
import type { Logger } from '../../../core/log/logger';
import { nativeAddon } from '../../../core/native/addon';
import { asClockError } from './clock-error';
import { startThread } from '../../../core/threads/start-thread';
import { LAYOUT, type ClockThreadData, type ClockThreadHello } from './clock-thread';
import type { ClockLane, ReplayClock } from './replay-clock';

/**
 * The clock thread's early-wake margin starts at 250 µs and adapts within
 * bounds: it spins at least 30 µs before a deadline (a wake-up under
 * SCHED_FIFO is late by ~10 µs), and at most 2 ms (a busy core under
 * SCHED_OTHER makes a waking thread wait a scheduler slice; spinning longer
 * would cost a core for little). A margin that stayed wide would also keep
 * a real-time thread spinning through dense replays until the kernel's
 * real-time throttling parks it for 50 ms of every second.
 */
const EARLY_WAKE_NS = 250_000;
const MIN_EARLY_WAKE_NS = 30_000;
const MAX_EARLY_WAKE_NS = 2_000_000;
/**
 * The clock thread runs under SCHED_FIFO at this priority when the daemon
 * may (CAP_SYS_NICE): it then preempts the HTTP threads and anything else
 * of ordinary priority the moment its deadline comes. Low among real-time
 * priorities, so kernel threads and real audio or control loops go first.
 * Without it, the thread asks for nice -10, else keeps the daemon's priority.
 */
const DEFAULT_REALTIME_PRIORITY = 10;
/**
 * A deadline reaches the clock thread within ~100 µs (a microtask, a futex
 * wake), more under load; handing over thousands at once (a dense replay
 * starting) takes about a microsecond each.
 */
const LEAD_NS = 1_000_000n;
const LEAD_PER_DEADLINE_NS = 1_000n;
const DEFAULT_NICENESS = -10;
/** Ring sizes (powers of two): commands queue up while the clock thread waits to run, releases while the main thread is busy. */
const COMMANDS = 1 << 16;
const RELEASES = 1 << 14;

type Release = (releasedAt: bigint) => void;

export interface HighResClockOptions {
  /** SCHED_FIFO priority for the clock thread (0: stay under SCHED_OTHER) */
  realtimePriority?: number;
  /** nice value for the clock thread when it is not real-time (0: the daemon's) */
  niceness?: number;
}

class HighResLane implements ClockLane {
  generation = 0;
  /** in deadline order; a session keeps at most its lookahead here */
  waiting: Release[] = [];

  constructor(
    private readonly clock: HighResClock,
    readonly id: number,
  ) {}

  at(deadline: bigint, release: Release): void {
    this.waiting.push(release);
    this.clock.queue(this, deadline);
  }

  clear(): void {
    this.generation++;
    this.waiting = [];
    this.clock.queue(this, null);
  }

  /** Runs the releases of `count` deadlines, unless the lane is cleared meanwhile. */
  release(generation: number, count: number, releasedAt: bigint): void {
    for (let i = 0; i < count && generation === this.generation; i++) this.waiting.shift()?.(releasedAt);
  }
}

export class HighResClock implements ReplayClock {
  private readonly worker: Worker;
  private readonly control: Int32Array;
  private readonly commands: Float64Array;
  private readonly releases: Float64Array;
  /** the clock thread's time zero (see ClockThreadData.epochNs) */
  private readonly epochNs = process.hrtime.bigint();
  /** commands that did not fit in the ring yet */
  private backlog: number[] = [];
  private flushQueued = false;
  private readonly lanes = new Map<number, HighResLane>();
  private lastLane = 0;
  private failure: Error | null = null;
  /** how the clock thread is scheduled, e.g. "SCHED_FIFO 10", once it has started */
  scheduling = 'starting';
  private readonly started: Promise<void>;
  /** read end of the pipe the clock thread rings when there are releases to run */
  private readonly doorbell: Socket;
  private readonly doorbellWriteFd: number;

  constructor(
    private readonly log: Logger,
    options: HighResClockOptions = {},
  ) {
    const [doorbellReadFd, doorbellWriteFd] = asClockError('E_PIPE', () => nativeAddon().doorbellPipe());
    this.doorbellWriteFd = doorbellWriteFd;
    const data: ClockThreadData = {
      doorbellFd: doorbellWriteFd,
      control: new SharedArrayBuffer(4 * LAYOUT.controlWords),
      commands: new SharedArrayBuffer(8 * LAYOUT.commandWidth * COMMANDS),
      releases: new SharedArrayBuffer(8 * LAYOUT.releaseWidth * RELEASES),
      layout: LAYOUT,
      epochNs: this.epochNs,
      earlyWakeNs: EARLY_WAKE_NS,
      minEarlyWakeNs: MIN_EARLY_WAKE_NS,
      maxEarlyWakeNs: MAX_EARLY_WAKE_NS,
      niceness: options.niceness ?? DEFAULT_NICENESS,
    };
    this.control = new Int32Array(data.control);
    this.commands = new Float64Array(data.commands);
    this.releases = new Float64Array(data.releases);
    Atomics.store(this.control, LAYOUT.doorbell, 1);
    this.worker = startThread(__dirname, 'clock-thread-main', { workerData: data, name: 'replay-clock' });
    this.worker.unref();
    this.doorbell = new Socket({ fd: doorbellReadFd, readable: true, writable: false });
    // the bytes only wake the loop; the releases are in the ring
    this.doorbell.on('data', () => this.readReleases()).unref();
    this.doorbell.on('error', (err) =>
      this.log.error('replay clock doorbell failed', { error: err.message }),
    );
    this.started = new Promise((resolve) => {
      this.worker.once('message', (hello: ClockThreadHello) => {
        this.schedule(hello, options.realtimePriority ?? DEFAULT_REALTIME_PRIORITY);
        resolve();
      });
    });
    this.worker.on('error', (err) => {
      this.failure = err;
      this.log.error('replay clock thread failed', { error: err.message });
    });
  }

  /** Resolves once the clock thread runs in its scheduling class. */
  ready(): Promise<void> {
    return this.started;
  }

  private schedule(hello: ClockThreadHello, realtimePriority: number): void {
    this.scheduling = hello.niceness === 0 ? 'SCHED_OTHER' : `SCHED_OTHER nice ${hello.niceness}`;
    if (realtimePriority > 0) {
      try {
        asClockError('E_SCHED', () => nativeAddon().setRealtimeScheduling(hello.tid, realtimePriority));
        this.scheduling = `SCHED_FIFO ${realtimePriority}`;
      } catch (err) {
        this.log.warn('replay clock stays under SCHED_OTHER: its deadlines may be late under load', {
          error: (err as Error).message,
        });
      }
    }
    this.log.info('replay clock started', { thread: hello.tid, scheduling: this.scheduling });
  }

  leadNs(count: number): bigint {
    return LEAD_NS + BigInt(count) * LEAD_PER_DEADLINE_NS;
  }

  now(): bigint {
    return process.hrtime.bigint();
  }

  lane(): ClockLane {
    return new HighResLane(this, ++this.lastLane);
  }

  /** Queues a deadline (or null: clear) of the lane; the thread gets them when this task is done. */
  queue(lane: HighResLane, deadline: bigint | null): void {
    if (this.failure) throw new Error(`the replay clock failed: ${this.failure.message}`);
    if (lane.waiting.length > 0) this.lanes.set(lane.id, lane);
    else this.lanes.delete(lane.id);
    this.keepAlive();
    // a deadline already past is due at once: 0 stands for it as well as any
    const since =
      deadline === null ? LAYOUT.none : deadline > this.epochNs ? Number(deadline - this.epochNs) : 0;
    this.backlog.push(lane.id, lane.generation, since);
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
  }

  /** Moves the backlog into the ring, as far as it fits, and wakes the thread. */
  private flush(): void {
    this.flushQueued = false;
    const head = Atomics.load(this.control, LAYOUT.commandHead);
    let tail = this.control[LAYOUT.commandTail]!;
    let taken = 0;
    while (taken < this.backlog.length && ((tail - head) | 0) < COMMANDS) {
      const slot = (tail & (COMMANDS - 1)) * LAYOUT.commandWidth;
      for (let k = 0; k < LAYOUT.commandWidth; k++) this.commands[slot + k] = this.backlog[taken + k]!;
      taken += LAYOUT.commandWidth;
      tail = (tail + 1) | 0;
    }
    this.backlog = this.backlog.slice(taken);
    Atomics.store(this.control, LAYOUT.commandTail, tail);
    Atomics.add(this.control, LAYOUT.wake, 1);
    Atomics.notify(this.control, LAYOUT.wake);
    // the thread drains the ring every time it wakes: try the rest again shortly
    if (this.backlog.length > 0 && !this.flushQueued) {
      this.flushQueued = true;
      setImmediate(() => this.flush());
    }
  }

  /** Runs every release in the ring, then asks for a doorbell again. */
  private readReleases(): void {
    for (;;) {
      const tail = Atomics.load(this.control, LAYOUT.releaseTail);
      let head = this.control[LAYOUT.releaseHead]!;
      for (; head !== tail; head = (head + 1) | 0) {
        const slot = (head & (RELEASES - 1)) * LAYOUT.releaseWidth;
        const id = this.releases[slot]!;
        const lane = this.lanes.get(id);
        lane?.release(
          this.releases[slot + 1]!,
          this.releases[slot + 2]!,
          this.epochNs + BigInt(Math.round(this.releases[slot + 3]!)),
        );
        if (lane?.waiting.length === 0) this.lanes.delete(id);
        Atomics.store(this.control, LAYOUT.releaseHead, (head + 1) | 0);
      }
      Atomics.store(this.control, LAYOUT.doorbell, 1);
      // releases written after the last look rang no doorbell: read them now, unless the thread rang since
      if (Atomics.load(this.control, LAYOUT.releaseTail) === head) break;
      if (Atomics.compareExchange(this.control, LAYOUT.doorbell, 1, 0) !== 1) break;
    }
    this.keepAlive();
  }

  /* Pending deadlines keep the process alive, as pending timers do. */
  private keepAlive(): void {
    if (this.lanes.size > 0) this.doorbell.ref();
    else this.doorbell.unref();
  }

  async close(): Promise<void> {
    this.lanes.clear();
    if (this.worker.threadId === -1) return;
    const exited = once(this.worker, 'exit');
    this.worker.ref();
    this.backlog.push(LAYOUT.none, 0, 0);
    this.flush();
    await exited;
    this.doorbell.destroy();
    closeSync(this.doorbellWriteFd);
  }
}
