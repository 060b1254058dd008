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
import { MessageChannel, type Worker } from 'node:worker_threads';
import type { Logger } from '../../../core/log/logger';
import { nativeAddon } from '../../../core/native/addon';
import { askShortestSlice } from '../../../core/threads/shortest-slice';
import { startThread } from '../../../core/threads/start-thread';
import { FrameBuffer } from '../lane/frame-buffer';
import { RING, laneBuffer } from '../lane/lane-layout';
import type { ClockLane, LaneSockets, OnReleased, ReplayClock } from '../replay-clock';
import { SEND_BUFFER } from '../send-buffer';
import { asClockError } from './clock-error';
import type { ClockThreadData, ClockThreadHello } from './clock-thread';
import { ClockWatchers } from './clock-watchers';
import {
  COMMAND_WIDTH,
  CONTROL_WORDS,
  REPORT_WIDTH,
  clockRings,
  type ClockCommand,
  type ClockPortMessage,
} from './clock-wire';
import { CommandQueue } from './command-queue';
import { HighResLane, type LaneHost } from './high-res-lane';
import { ReleaseReader } from './release-reader';

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
 * Without it, the thread asks for nice -10, else keeps the daemon's priority,
 * and for the fair scheduler's shortest slice (core/threads/shortest-slice.ts).
 */
const DEFAULT_REALTIME_PRIORITY = 10;
/**
 * A play's first deadline reaches the clock thread within ~100 µs (a
 * microtask, a futex wake), more under load: its records are in the buffer
 * already (the read-ahead wrote them), so only the ANCHOR and RECORDS
 * commands travel. The lead is also the client's: the play's answer and
 * its `playing` state go out at the anchor, and a client takes them on the
 * thread that reads the stream (1.5-2.4 ms of CPU for the answer alone,
 * measured in Node at load 17). With 1 ms, the first event of every play,
 * resume and seek waited behind them and reached the client later than
 * every other (issue 48); 5 ms lets the client be done before it.
 */
const LEAD_NS = 5_000_000n;
const DEFAULT_NICENESS = -10;
/** Ring sizes (powers of two): commands queue up while the clock thread waits to run, releases while the main thread is busy. */
const COMMANDS = 1 << 16;
const REPORTS = 1 << 14;

/**
 * Lane buffers kept for the next lane to play (making one and committing its
 * memory again costs the main thread): a buffer written once stays
 * committed, so few are kept.
 */
const SPARE_RINGS = 2;

export interface HighResClockOptions {
  /** SCHED_FIFO priority for the clock thread (0: stay under SCHED_OTHER) */
  realtimePriority?: number;
  /** nice value for the clock thread when it is not real-time (0: the daemon's) */
  niceness?: number;
}

export class HighResClock implements ReplayClock, LaneHost {
  private readonly worker: Worker;
  /** the clock thread's time zero (see ClockThreadData.epochNs) */
  private readonly epochNs = process.hrtime.bigint();
  private readonly commands: CommandQueue;
  private readonly releases: ReleaseReader;
  private readonly watchers: ClockWatchers;
  private readonly spares: SharedArrayBuffer[] = [];
  private lastLane = 0;
  /** how the clock thread is scheduled, e.g. "SCHED_FIFO 10", once it has started */
  scheduling = 'starting';
  /** the clock thread's id (its /proc/self/task entry), once it has started */
  thread = 0;
  private readonly started: Promise<void>;
  private readonly doorbellWriteFd: number;

  constructor(
    private readonly log: Logger,
    options: HighResClockOptions = {},
  ) {
    const [doorbellReadFd, doorbellWriteFd] = asClockError('E_PIPE', () => nativeAddon().doorbellPipe());
    this.doorbellWriteFd = doorbellWriteFd;
    // where lanes' rings and watchers' texts go to the clock thread
    const channel = new MessageChannel();
    channel.port1.unref();
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
    const { control, commands, reports } = clockRings(data);
    this.commands = new CommandQueue(control, commands, channel.port1);
    this.watchers = new ClockWatchers(this.commands, () => this.settle());
    this.releases = new ReleaseReader(
      doorbellReadFd,
      control,
      reports,
      this.commands,
      this.epochNs,
      (watcher, reason) => this.watchers.closed(watcher, reason),
      log,
    );
    this.worker = startThread(__dirname, 'clock-thread-main', {
      workerData: data,
      transferList: [channel.port2],
      name: 'replay-clock',
    });
    this.worker.unref();
    this.started = new Promise((resolve) => {
      this.worker.once('message', (hello: ClockThreadHello) => {
        this.schedule(hello, options.realtimePriority ?? DEFAULT_REALTIME_PRIORITY);
        resolve();
      });
    });
    this.worker.on('error', (err) => {
      this.commands.failure = err;
      this.log.error('replay clock thread failed', { error: err.message });
    });
  }

  /** Resolves once the clock thread runs in its scheduling class. */
  ready(): Promise<void> {
    return this.started;
  }

  private schedule(hello: ClockThreadHello, realtimePriority: number): void {
    this.thread = hello.tid;
    this.scheduling = hello.niceness === 0 ? 'SCHED_OTHER' : `SCHED_OTHER nice ${hello.niceness}`;
    if (realtimePriority > 0) {
      try {
        asClockError('E_SCHED', () => nativeAddon().setRealtimeScheduling(hello.tid, realtimePriority));
        this.scheduling = `SCHED_FIFO ${realtimePriority}`;
        this.log.info('replay clock started', { thread: hello.tid, scheduling: this.scheduling });
        return;
      } catch (err) {
        this.log.warn('replay clock stays under SCHED_OTHER: its deadlines may be late under load', {
          error: (err as Error).message,
        });
      }
    }
    // a deadline's wake-up then preempts a busy neighbour instead of waiting out its slice
    const slice = askShortestSlice(hello.tid, 'replay clock', this.log);
    if (slice) this.scheduling += ` ${slice}`;
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

  queue(lane: HighResLane, command: ClockCommand): void {
    this.commands.queue(lane.id, lane.generation, command);
    this.releases.track(lane);
  }

  post(message: ClockPortMessage): void {
    this.commands.post(message);
  }

  flush(): void {
    this.commands.flush();
  }

  /**
   * Waits until the thread has done every command queued so far, then takes
   * the reports it made before them (their releases run later, or go to the
   * lane's clear()).
   */
  settle(): void {
    this.commands.settle();
    this.releases.settled();
  }

  socketsOf(lane: HighResLane): LaneSockets {
    return this.watchers.sockets((command) => this.queue(lane, command));
  }

  prompt(lane: HighResLane, on: boolean): void {
    this.releases.prompt(lane, on);
  }

  async close(): Promise<void> {
    this.releases.clear();
    if (this.worker.threadId === -1) return;
    const exited = once(this.worker, 'exit');
    this.worker.ref();
    this.commands.stop();
    await exited;
    this.watchers.closeAll();
    this.releases.close();
    closeSync(this.doorbellWriteFd);
  }
}
