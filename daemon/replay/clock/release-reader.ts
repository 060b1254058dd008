/**
 * The main thread's half of the report ring: the clock thread rings a
 * doorbell (a pipe) when it has reported; this reads the reports at most
 * every LOOK_EVERY_MS (at once while a lane has streams the main thread
 * writes), hands each lane its releases, and runs them in slices so the
 * event loop gets its turn.
 */
import type { Logger } from '../../../core/log/logger';
import { nativeAddon, type NativeDoorbellWatch } from '../../../core/native/addon';
import type { SocketClosed } from '../replay-clock';
import { asClockError } from './clock-error';
import type { CommandQueue } from './command-queue';
import { CLOSE_REASONS, CONTROL, decodeReport, type ClockReport, type SlotRing } from './clock-wire';

/** Releases run for at most this long before the event loop gets a turn. */
const RELEASE_SLICE_MS = 2;
/**
 * The main thread looks at the clock's reports at most this often: the
 * clock counts releases meanwhile and reports them one per lane, so a dense
 * replay's progress costs the main thread at most 100 looks a second.
 */
const LOOK_EVERY_MS = 10;

/** What the reader needs of a lane (high-res-lane.ts). */
export interface ReportedLane {
  readonly id: number;
  /** deadlines handed over and not reported released yet */
  readonly outstanding: number;
  /** the clock released the next `count` deadlines of `generation` */
  take(generation: number, count: number, releasedAt: bigint, writtenAt: bigint | null): void;
  /** tells the reported releases until `until` (performance.now()); false when some are left */
  run(until: number): boolean;
}

export class ReleaseReader {
  /** lanes with deadlines the clock holds: while any are, the process stays alive */
  private readonly lanes = new Map<number, ReportedLane>();
  /** lanes with reported releases to run, and watchers the clock closed, whose owners are told when releases run */
  private readonly due = new Set<ReportedLane>();
  private closings: { watcher: number; reason: SocketClosed }[] = [];
  /** when the main thread last read the reports (performance.now()), and the look waiting for LOOK_EVERY_MS */
  private lastLook = -Infinity;
  private lookTimer: NodeJS.Timeout | null = null;
  /** lanes whose releases the main thread's own streams wait for */
  private readonly promptLanes = new Set<ReportedLane>();
  private readonly doorbell: NativeDoorbellWatch;

  constructor(
    doorbellReadFd: number,
    private readonly control: Int32Array,
    private readonly reports: SlotRing,
    private readonly commands: CommandQueue,
    private readonly epochNs: bigint,
    private readonly onClosed: (watcher: number, reason: SocketClosed) => void,
    log: Logger,
  ) {
    Atomics.store(this.control, CONTROL.doorbell, 1);
    // the bytes only wake the loop (the addon reads them); the releases are in the ring
    this.doorbell = asClockError(
      'E_PIPE',
      () =>
        new (nativeAddon().DoorbellWatch)(doorbellReadFd, (error) => {
          if (error) log.error('replay clock doorbell failed', { error: error.message });
          else this.look();
        }),
    );
  }

  /** `lane` queued a command: it keeps the process alive while the clock holds deadlines of it. */
  track(lane: ReportedLane): void {
    if (lane.outstanding > 0) this.lanes.set(lane.id, lane);
    else this.lanes.delete(lane.id);
    this.keepAlive();
  }

  /** `lane` has streams the main thread writes (`on`): while any lane has, every report is read at once. */
  prompt(lane: ReportedLane, on: boolean): void {
    if (on) this.promptLanes.add(lane);
    else this.promptLanes.delete(lane);
  }

  /** The clock thread did every command so far: takes its reports; their releases run on the next turn. */
  settled(): void {
    this.collect();
    if (this.due.size > 0 || this.closings.length > 0) setImmediate(() => this.readReleases());
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
   * again: settled() only collects.
   */
  private readReleases(budgetMs = RELEASE_SLICE_MS): void {
    this.lastLook = performance.now();
    const until = this.lastLook + budgetMs;
    for (;;) {
      this.collect();
      for (const { watcher, reason } of this.closings.splice(0)) this.onClosed(watcher, reason);
      for (const lane of this.due) {
        if (!lane.run(until)) {
          setImmediate(() => this.readReleases());
          return this.keepAlive();
        }
        this.due.delete(lane);
      }
      Atomics.store(this.control, CONTROL.doorbell, 1);
      // the clock reports what it counted meanwhile as soon as it looks: wake it to look now, and only
      // then (a wake-up for nothing is a core taken from the hops after each release)
      if (Atomics.load(this.control, CONTROL.held) === 1) this.commands.wake();
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

  /* Pending deadlines keep the process alive, as pending timers do. */
  private keepAlive(): void {
    if (this.lanes.size > 0) this.doorbell.ref();
    else this.doorbell.unref();
  }

  /** Forgets every lane and stops looking (the clock is closing). */
  clear(): void {
    if (this.lookTimer) clearTimeout(this.lookTimer);
    this.promptLanes.clear();
    this.lanes.clear();
    this.due.clear();
  }

  close(): void {
    this.doorbell.close();
  }
}
