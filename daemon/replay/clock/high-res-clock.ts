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
import { MessageChannel, type MessagePort, type Worker } from 'node:worker_threads';
import type { Logger } from '../../../core/log/logger';
import { nativeAddon } from '../../../core/native/addon';
import { asClockError } from './clock-error';
import { startThread } from '../../../core/threads/start-thread';
import { Fifo } from '../fifo';
import { SEND_BUFFER } from '../send-buffer';
import { clockRings, type ClockThreadData, type ClockThreadHello } from './clock-thread';
import { FrameBuffer } from '../lane/frame-buffer';
import type { ReleaseStats } from '../release-stats';
import {
  CLOSE_REASONS,
  COMMAND_WIDTH,
  CONTROL,
  CONTROL_WORDS,
  REPORT_WIDTH,
  decodeReport,
  encodeCommand,
  type ClockCommand,
  type ClockPortMessage,
  type ClockReport,
  type SlotRing,
} from './clock-wire';
import { RING, laneBuffer } from '../lane/lane-layout';
import { ClockError } from './clock-error';
import type {
  ClockLane,
  LaneSockets,
  OnReleased,
  Released,
  ReplayClock,
  SocketClosed,
} from '../replay-clock';

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
 * A play's first deadline reaches the clock thread within ~100 µs (a
 * microtask, a futex wake), more under load: its records are in the buffer
 * already (the read-ahead wrote them), so only the ANCHOR and RECORDS
 * commands travel.
 */
const LEAD_NS = 1_000_000n;
const DEFAULT_NICENESS = -10;
/** Ring sizes (powers of two): commands queue up while the clock thread waits to run, releases while the main thread is busy. */
const COMMANDS = 1 << 16;
const REPORTS = 1 << 14;
/** Releases run for at most this long before the event loop gets a turn. */
const RELEASE_SLICE_MS = 2;
/**
 * The main thread looks at the clock's reports at most this often: the
 * clock counts releases meanwhile and reports them one per lane, so a dense
 * replay's progress costs the main thread at most 100 looks a second.
 */
const LOOK_EVERY_MS = 10;
/** How long the main thread waits for the clock thread to take a command it must see done. */
const SYNC_TIMEOUT_MS = 2000;

/**
 * Lane buffers kept for the next lane to play (making one and committing its
 * memory again costs the main thread): a buffer written once stays
 * committed, so few are kept.
 */
const SPARE_RINGS = 2;
/** Releases one report tells the session at most, so that the event loop gets its turn between slices. */
const RELEASES_PER_CALL = 1024;

export interface HighResClockOptions {
  /** SCHED_FIFO priority for the clock thread (0: stay under SCHED_OTHER) */
  realtimePriority?: number;
  /** nice value for the clock thread when it is not real-time (0: the daemon's) */
  niceness?: number;
}

/**
 * A session's lane: the records of the buffer it plays (written by the
 * read-ahead) are published to the clock by one RECORDS command per task;
 * the clock's reports come back as counts, taken from the buffer and told to
 * the lane's OnReleased in order. The session's statistics and lateness
 * pages are handed to the clock once each (again after a clear for good).
 */
class HighResLane implements ClockLane {
  generation = 0;
  /** the buffer the clock has (null until a play) */
  private buffer: FrameBuffer | null = null;
  /** records published to the clock, and reported released (counted since the buffer was made) */
  private published = 0;
  private reportedTail = 0;
  /** released by the clock and reported, in order, not yet told */
  private readonly reported = new Fifo<Released>();
  private stats: ReleaseStats | null = null;
  /** the lateness pages, and how many of them the clock has */
  private readonly pages: { page: number; shared: SharedArrayBuffer }[] = [];
  private pagesSent = 0;
  private statsSent = false;
  readonly sockets: LaneSockets;

  constructor(
    private readonly clock: HighResClock,
    readonly id: number,
    private readonly onReleased: OnReleased,
  ) {
    this.sockets = clock.socketsOf(this);
  }

  /** Deadlines handed over and not reported released yet: while any are, the process stays alive. */
  get outstanding(): number {
    return this.published - this.reportedTail;
  }

  prompt(on: boolean): void {
    this.clock.prompt(this, on);
  }

  keep(stats: ReleaseStats, pages: { page: number; shared: SharedArrayBuffer }[]): void {
    this.stats = stats;
    this.pages.push(...pages);
    this.handOver();
  }

  /** Hands the clock what it does not have yet of the session's statistics and pages. */
  private handOver(): void {
    if (!this.buffer) return;
    if (this.stats && !this.statsSent) {
      this.clock.post({ stats: this.stats.shared });
      this.clock.queue(this, { kind: 'stats' });
      this.statsSent = true;
    }
    for (; this.pagesSent < this.pages.length; this.pagesSent++) {
      const { page, shared } = this.pages[this.pagesSent]!;
      this.clock.post({ log: shared });
      this.clock.queue(this, { kind: 'log', page });
    }
  }

  play(buffer: FrameBuffer, anchor: bigint): void {
    if (buffer !== this.buffer) {
      this.buffer = buffer;
      this.published = this.reportedTail = buffer.taken;
      buffer.processedUpTo(0);
      this.clock.post({ ring: buffer.ring });
      this.clock.queue(this, { kind: 'ring', head: buffer.taken });
    }
    this.handOver();
    this.clock.queue(this, { kind: 'anchor', at: this.clock.sinceEpoch(anchor) });
    this.publish();
    // the anchor is a millisecond ahead (LEAD_NS): the clock takes it now, not after whatever else this task does
    this.clock.flush();
  }

  publish(): void {
    if (!this.buffer || this.buffer.tail === this.published) return;
    this.handOver();
    this.published = this.buffer.tail;
    this.clock.queue(this, { kind: 'records', tail: this.published });
  }

  clear(forGood = false): Released[] {
    const buffer = this.buffer;
    if (!buffer) return [];
    this.clock.queue(this, { kind: 'clear', forGood: forGood ? 1 : 0 });
    // frames released before this may be on their sockets already: their releases go to the caller
    this.clock.settle();
    const seen: Released[] = [];
    for (let r = this.reported.shift(); r; r = this.reported.shift()) {
      buffer.take(r.count);
      seen.push(r);
    }
    this.generation++;
    this.published = this.reportedTail = buffer.taken;
    if (forGood) {
      // the clock thread has let go of it (the settle above): the next lane to play reuses it
      this.clock.keepSpare(buffer);
      this.buffer = null;
      this.statsSent = false;
      this.pagesSent = 0;
    }
    return seen;
  }

  /** The clock released the next `count` deadlines of `generation` (none if the lane was cleared since). */
  take(generation: number, count: number, releasedAt: bigint, writtenAt: bigint | null): void {
    if (generation !== this.generation) return;
    const n = Math.min(count, this.published - this.reportedTail);
    if (n <= 0) return;
    this.reportedTail += n;
    this.reported.push({ count: n, releasedAt, writtenAt });
  }

  /**
   * Tells the reported releases in order, in slices, until `until`
   * (performance.now()); false when some are left. A release that clears
   * the lane takes the rest.
   */
  run(until: number): boolean {
    for (let r = this.reported.at(0); r; r = this.reported.at(0)) {
      const buffer = this.buffer!;
      const count = Math.min(r.count, RELEASES_PER_CALL);
      if (count === r.count) this.reported.shift();
      else r.count -= count;
      buffer.take(count);
      buffer.processedUpTo(buffer.field(buffer.taken - 1, 'index') + 1);
      this.onReleased({ count, releasedAt: r.releasedAt, writtenAt: r.writtenAt });
      if (performance.now() > until) return this.reported.length === 0;
    }
    return true;
  }
}

export class HighResClock implements ReplayClock {
  private readonly worker: Worker;
  private readonly control: Int32Array;
  private readonly commands: SlotRing;
  private readonly reports: SlotRing;
  /** the clock thread's time zero (see ClockThreadData.epochNs) */
  private readonly epochNs = process.hrtime.bigint();
  /** commands that did not fit in the ring yet */
  private backlog: number[] = [];
  /** where the commands not yet in the ring start in `backlog` */
  private backlogHead = 0;
  private flushQueued = false;
  private readonly lanes = new Map<number, HighResLane>();
  private readonly spares: SharedArrayBuffer[] = [];
  private lastLane = 0;
  private failure: Error | null = null;
  /** how the clock thread is scheduled, e.g. "SCHED_FIFO 10", once it has started */
  scheduling = 'starting';
  private readonly started: Promise<void>;
  /** read end of the pipe the clock thread rings when there are releases to run */
  private readonly doorbell: Socket;
  private readonly doorbellWriteFd: number;
  /** where lanes' rings and watchers' texts go to the clock thread */
  private readonly port: MessagePort;
  /** watchers whose sockets the clock thread writes, by id: the thread's copy of the socket, and whom to tell it closed */
  private readonly watchers = new Map<number, { fd: number; onClosed: (reason: SocketClosed) => void }>();
  private lastWatcher = 0;
  private lastSync = 0;
  /** lanes with reported releases to run, and watchers the clock closed, whose owners are told when releases run */
  private readonly due = new Set<HighResLane>();
  private closings: { watcher: number; reason: SocketClosed }[] = [];
  /** when the main thread last read the reports (performance.now()), and the look waiting for LOOK_EVERY_MS */
  private lastLook = -Infinity;
  private lookTimer: NodeJS.Timeout | null = null;
  /** lanes whose releases the main thread's own streams wait for */
  private readonly promptLanes = new Set<HighResLane>();

  constructor(
    private readonly log: Logger,
    options: HighResClockOptions = {},
  ) {
    const [doorbellReadFd, doorbellWriteFd] = asClockError('E_PIPE', () => nativeAddon().doorbellPipe());
    this.doorbellWriteFd = doorbellWriteFd;
    const channel = new MessageChannel();
    this.port = channel.port1;
    this.port.unref();
    const data: ClockThreadData = {
      doorbellFd: doorbellWriteFd,
      port: channel.port2,
      sendBuffer: SEND_BUFFER,
      control: new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT * CONTROL_WORDS),
      commands: new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT * COMMAND_WIDTH * COMMANDS),
      reports: new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT * REPORT_WIDTH * REPORTS),
      epochNs: this.epochNs,
      earlyWakeNs: EARLY_WAKE_NS,
      minEarlyWakeNs: MIN_EARLY_WAKE_NS,
      maxEarlyWakeNs: MAX_EARLY_WAKE_NS,
      niceness: options.niceness ?? DEFAULT_NICENESS,
    };
    ({ control: this.control, commands: this.commands, reports: this.reports } = clockRings(data));
    Atomics.store(this.control, CONTROL.doorbell, 1);
    this.worker = startThread(__dirname, 'clock-thread-main', {
      workerData: data,
      transferList: [channel.port2],
      name: 'replay-clock',
    });
    this.worker.unref();
    this.doorbell = new Socket({ fd: doorbellReadFd, readable: true, writable: false });
    // the bytes only wake the loop; the releases are in the ring
    this.doorbell.on('data', () => this.look()).unref();
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

  leadNs(): bigint {
    return LEAD_NS;
  }

  frameBuffer(dense: boolean): FrameBuffer {
    const bytes = dense ? RING.denseDataBytes : RING.dataBytes;
    const spare = this.spares.findIndex((ring) => ring.byteLength === RING.dataOffset + bytes);
    return new FrameBuffer(spare >= 0 ? this.spares.splice(spare, 1)[0]! : laneBuffer(bytes));
  }

  now(): bigint {
    return process.hrtime.bigint();
  }

  lane(onReleased: OnReleased): ClockLane {
    return new HighResLane(this, ++this.lastLane, onReleased);
  }

  /** Keeps a buffer let go of for the next play, unless a read-ahead still writes into it. */
  keepSpare(buffer: FrameBuffer): void {
    if (this.spares.length < SPARE_RINGS && !buffer.writing) this.spares.push(buffer.ring);
  }

  /** Nanoseconds from the thread's time zero to `deadline`; a deadline already past is 0, due at once. */
  sinceEpoch(deadline: bigint): number {
    return deadline > this.epochNs ? Number(deadline - this.epochNs) : 0;
  }

  /** Queues a command of `lane`; the thread gets it when this task is done (or at settle()). */
  queue(lane: HighResLane, command: ClockCommand): void {
    if (this.failure) throw new Error(`the replay clock failed: ${this.failure.message}`);
    if (lane.outstanding > 0) this.lanes.set(lane.id, lane);
    else this.lanes.delete(lane.id);
    this.keepAlive();
    this.append(lane.id, lane.generation, command);
    this.flushSoon();
  }

  private flushSoon(): void {
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
  }

  private append(lane: number, generation: number, command: ClockCommand): void {
    encodeCommand(this.backlog, this.backlog.length, lane, generation, command);
  }

  /** A message the thread reads when a command queued after it says so. */
  post(message: ClockPortMessage): void {
    this.port.postMessage(message);
  }

  /**
   * Waits until the thread has done every command queued so far, then takes
   * the reports it made before them (their releases run later, or go to the
   * lane's clear()). Blocks the main thread for as long as the clock thread
   * takes to look (microseconds under SCHED_FIFO).
   */
  settle(): void {
    const seq = ++this.lastSync;
    this.append(0, 0, { kind: 'sync', seq });
    const giveUp = Date.now() + SYNC_TIMEOUT_MS;
    for (;;) {
      this.flush();
      const ack = Atomics.load(this.control, CONTROL.ack);
      if (((ack - seq) | 0) >= 0) break;
      if (this.failure || Date.now() > giveUp)
        throw new ClockError(
          'E_CLOCK_STALLED',
          `the replay clock thread did not answer within ${SYNC_TIMEOUT_MS} ms${this.failure ? `: ${this.failure.message}` : ''}`,
        );
      Atomics.wait(this.control, CONTROL.ack, ack, 1);
    }
    this.collect();
    if (this.due.size > 0 || this.closings.length > 0) setImmediate(() => this.readReleases());
  }

  /** The sockets API of `lane`: every call is a command in order with the lane's deadlines. */
  socketsOf(lane: HighResLane): LaneSockets {
    return {
      attach: (fd, fromIndex, first, onClosed) => {
        const id = ++this.lastWatcher;
        const copy = asClockError('E_DUP', () => nativeAddon().duplicateFd(fd));
        this.watchers.set(id, { fd: copy, onClosed });
        this.post({ text: first });
        this.queue(lane, { kind: 'attach', watcher: id, fd: copy, fromIndex });
        // the thread must take the watcher before this thread runs more releases or reuses ring bytes
        this.settle();
        return id;
      },
      send: (watcher, text) => {
        this.post({ text });
        this.queue(lane, { kind: 'send', watcher });
      },
      end: (watcher) => this.queue(lane, { kind: 'end', watcher }),
      detach: (watcher) => this.queue(lane, { kind: 'detach', watcher }),
    };
  }

  /** Moves the backlog into the ring, as far as it fits, and wakes the thread. */
  flush(): void {
    this.flushQueued = false;
    const taken = this.commands.push(this.backlog, this.backlogHead);
    if (taken > this.backlogHead) {
      if (taken === this.backlog.length) {
        this.backlog = [];
        this.backlogHead = 0;
      } else this.backlogHead = taken;
      Atomics.add(this.control, CONTROL.wake, 1);
      Atomics.notify(this.control, CONTROL.wake);
    }
    // the ring is full: the thread drains it as it wakes, so try the rest a little later (not in a busy loop)
    if (this.backlogHead < this.backlog.length && !this.flushQueued) {
      this.flushQueued = true;
      setTimeout(() => this.flush(), 1);
    }
  }

  /** `lane` has streams the main thread writes (`on`): while any lane has, every report is read at once. */
  prompt(lane: HighResLane, on: boolean): void {
    if (on) this.promptLanes.add(lane);
    else this.promptLanes.delete(lane);
  }

  /** The doorbell rang: reads the reports now, or once LOOK_EVERY_MS has passed since the last look. */
  private look(): void {
    const wait = this.lastLook + LOOK_EVERY_MS - performance.now();
    if (wait <= 0 || this.promptLanes.size > 0) return this.readReleases();
    this.lookTimer ??= setTimeout(() => {
      this.lookTimer = null;
      this.readReleases();
    }, wait);
  }

  /**
   * Runs the releases the clock reported, then asks for a doorbell again.
   * Past `budgetMs` it lets the event loop turn and comes back (the doorbell
   * stays off meanwhile): a dense replay the main thread cannot keep up with
   * must not starve every request behind it. Nothing it runs can call it
   * again: settle() only collects.
   */
  private readReleases(budgetMs = RELEASE_SLICE_MS): void {
    this.lastLook = performance.now();
    const until = this.lastLook + budgetMs;
    for (;;) {
      this.collect();
      for (const { watcher, reason } of this.closings.splice(0)) this.closed(watcher, reason);
      for (const lane of this.due) {
        if (!lane.run(until)) {
          setImmediate(() => this.readReleases());
          return this.keepAlive();
        }
        this.due.delete(lane);
      }
      Atomics.store(this.control, CONTROL.doorbell, 1);
      // the clock reports what it counted meanwhile as soon as it looks: wake it to look now
      Atomics.add(this.control, CONTROL.wake, 1);
      Atomics.notify(this.control, CONTROL.wake);
      // reports written after the last look rang no doorbell: read them now, unless the thread rang since
      if (this.reports.empty) break;
      if (Atomics.compareExchange(this.control, CONTROL.doorbell, 1, 0) !== 1) break;
    }
    this.keepAlive();
  }

  /** Takes every report in the ring, running nothing: releases wait in their lanes, closings here. */
  private collect(): void {
    for (let slot = this.reports.peek(); slot >= 0; slot = this.reports.peek()) {
      const report = decodeReport(this.reports.slots, slot);
      this.reports.take();
      this.report(report);
    }
  }

  private report(report: ClockReport): void {
    if (report.kind === 'closed') {
      this.closings.push({ watcher: report.watcher, reason: CLOSE_REASONS[report.reason] ?? 'gone' });
      return;
    }
    const lane = this.lanes.get(report.lane);
    if (!lane) return;
    lane.take(
      report.generation,
      report.count,
      this.epochNs + BigInt(report.releasedAt),
      report.writtenAt < 0 ? null : this.epochNs + BigInt(report.writtenAt),
    );
    this.due.add(lane);
    if (lane.outstanding === 0) this.lanes.delete(report.lane);
  }

  /** The clock closed its copy of a watcher's socket: this thread closes the descriptor and tells the watcher. */
  private closed(id: number, reason: SocketClosed): void {
    const watcher = this.watchers.get(id);
    if (!watcher) return;
    this.watchers.delete(id);
    closeSync(watcher.fd);
    watcher.onClosed(reason);
  }

  /* Pending deadlines keep the process alive, as pending timers do. */
  private keepAlive(): void {
    if (this.lanes.size > 0) this.doorbell.ref();
    else this.doorbell.unref();
  }

  async close(): Promise<void> {
    if (this.lookTimer) clearTimeout(this.lookTimer);
    this.promptLanes.clear();
    this.lanes.clear();
    this.due.clear();
    if (this.worker.threadId === -1) return;
    const exited = once(this.worker, 'exit');
    this.worker.ref();
    this.append(0, 0, { kind: 'stop' });
    this.flush();
    this.port.close();
    await exited;
    for (const watcher of this.watchers.values()) closeSync(watcher.fd);
    this.watchers.clear();
    this.doorbell.destroy();
    closeSync(this.doorbellWriteFd);
  }
}
