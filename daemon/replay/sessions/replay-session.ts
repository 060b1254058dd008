/**
 * One replay session: its state machine, what it has emitted (statistics,
 * history for resuming streams) and its snapshot; its Player owns where the
 * replay stands, reads ahead and hands deadlines to the clock. Timing model:
 * docs/replay.md, "Timing".
 */
import { exactJson } from '../../../core/json/exact-json';
import { badRequest } from '../../http/problem';
import type { ReplayClock } from '../replay-clock';
import { Broadcast, type Watcher } from '../stream/broadcast';
import { sseFrame } from '../stream/sse-frame';
import { lateFrameText } from '../lane/replay-frame';
import { Player } from './player';
import { CHECKPOINT_EVERY } from '../lane/frame-writer';
import { Schedule } from '../../../core/replay/schedule';
import type { SessionRecord } from './session-record';
import type { Driving } from './session-schema';
import type { RestoredSession, SessionSnapshot } from './session-snapshot';
import { nextState, type SessionState } from './session-state';
import type { MetricDelta, TimingStats } from '../timing-stats';
import { LatenessLog } from '../lateness-log';
import { ReleaseStats } from '../release-stats';
import type { Released } from '../replay-clock';
import type { Transaction } from './transaction';
import type { WallClock } from './wall-clock';

export { BEHIND_AFTER_NS } from '../release-stats';

export interface SessionSettings {
  id: string;
  transaction: Transaction;
  speedFactor: number;
  extraLatencyNs: number;
  driving: Driving | null;
  /** the client that created it (token name or address): per-client limits count it */
  owner: string;
}

/** Frames a resuming stream reads again: `events` of them, as UTF-8 bytes. */
export interface HistoryPage {
  bytes: Uint8Array;
  events: number;
}

/** Told, in aggregate, how late events were released by the clock and reached the watchers (metrics). */
export interface TimingObserver {
  released(delta: MetricDelta): void;
  delivered(delta: MetricDelta): void;
}

export interface SessionContext {
  clock: ReplayClock;
  /** created_at and updated_at */
  wall: WallClock;
  /** after every state change: persist, (dis)arm expiry */
  changed(session: ReplaySession): void;
  timing?: TimingObserver;
}

export class ReplaySession {
  readonly id: string;
  readonly transaction: Transaction;
  readonly schedule: Schedule;
  readonly speedFactor: number;
  readonly extraLatencyNs: number;
  readonly driving: Driving | null;
  readonly owner: string;
  createdAt: string;
  updatedAt: string;
  state: SessionState = 'ready';
  /** what the clock released and delivered, kept by the clock thread */
  private readonly stats = new ReleaseStats();
  /** whether the last look found the replay behind its schedule */
  private behind = false;
  /** the metrics as last told, to tell them what is new */
  private readonly toldReleased = this.stats.lateness.metricMark();
  private readonly toldDelivered = this.stats.delivery.metricMark();
  /** each released event's lateness, for the history a resuming stream reads */
  private readonly latenessByIndex = new LatenessLog();
  private readonly player: Player;
  /** the last control that reads the store, settled once it has acted (or failed) */
  private turns: Promise<void> = Promise.resolve();
  private readonly broadcast = new Broadcast((deadlines) => {
    const now = this.context.clock.now();
    for (const deadline of deadlines) this.stats.delivery.add(now > deadline ? now - deadline : 0n);
    this.tellMetrics();
  });

  constructor(
    settings: SessionSettings,
    private readonly context: SessionContext,
  ) {
    this.id = settings.id;
    this.transaction = settings.transaction;
    this.speedFactor = settings.speedFactor;
    this.extraLatencyNs = settings.extraLatencyNs;
    this.driving = settings.driving;
    this.owner = settings.owner;
    this.createdAt = this.updatedAt = new Date(context.wall.nowMs()).toISOString();
    this.schedule = new Schedule(settings.speedFactor, BigInt(settings.extraLatencyNs));
    this.player = new Player(
      this.transaction,
      this.schedule,
      context.clock,
      {
        released: (released) => this.emit(released),
        ended: () => {
          if (this.state === 'playing') this.finish();
        },
      },
      this.stats,
      this.latenessByIndex,
    );
  }

  /** How late the clock released each event. */
  get lateness(): TimingStats {
    return this.stats.lateness;
  }

  /** From deadline to the moment the frame was written to every watcher's socket. */
  get delivery(): TimingStats {
    return this.stats.delivery;
  }

  get durationNs(): bigint {
    return this.transaction.durationNs;
  }

  get position(): bigint {
    return this.player.position(this.state === 'playing');
  }

  /** Wall time the replay still needs, were it playing from here (for Retry-After). */
  get remainingNs(): bigint {
    return this.player.remainingNs(this.state === 'playing');
  }

  record(): SessionRecord {
    const timing = this.lateness.summary();
    return {
      id: this.id,
      transaction_id: this.transaction.id,
      speed_factor: this.speedFactor,
      extra_latency_ns: this.extraLatencyNs,
      driving: this.driving,
      state: this.state,
      position_ns: this.position,
      duration_ns: this.durationNs,
      events_total: this.transaction.total,
      events_emitted: this.player.emitted,
      created_at: this.createdAt,
      updated_at: this.updatedAt,
      timing: {
        lateness_p50_ns: timing.p50,
        lateness_p99_ns: timing.p99,
        lateness_max_ns: timing.max,
        behind_ns: this.state === 'playing' ? BigInt(this.stats.behindNs) : 0n,
      },
    };
  }

  json(): string {
    return exactJson(this.record());
  }

  /** Plays once the first events are read (a lookahead's worth), so the schedule does not start without them. */
  play(): Promise<void> {
    return this.inTurn(async () => {
      nextState(this.id, this.state, 'play');
      await this.player.primed();
      this.start(nextState(this.id, this.state, 'play'));
    });
  }

  pause(): void {
    const next = nextState(this.id, this.state, 'pause');
    this.takeBack();
    // the releases made before the pause may have finished the replay
    if (this.state !== 'playing') return;
    this.player.freeze();
    this.enter(next);
  }

  /** Ends the session for good (again: a no-op); its streams end after the state event. */
  stop(): void {
    const next = nextState(this.id, this.state, 'stop');
    if (this.state === 'stopped') return;
    if (this.state === 'playing') this.player.freeze();
    this.takeBack();
    this.player.drop();
    this.enter(next);
    this.broadcast.end();
    this.promptForMainWatchers();
  }

  /**
   * Continues from the first event at or after `positionNs` (recorded
   * offset), once its index is counted and, for a playing session, the
   * events from there are read.
   */
  seek(positionNs: bigint): Promise<void> {
    return this.inTurn(async () => {
      if (positionNs < 0n || positionNs > this.durationNs)
        throw badRequest([
          { param: 'position_ns', message: `must be 0..${this.durationNs} (the session's duration_ns)` },
        ]);
      nextState(this.id, this.state, 'seek');
      const ts = this.transaction.firstTs + positionNs;
      const index = await this.transaction.indexAt(ts);
      // a stop may have come meanwhile (409 before reading on), or a pause: the seek applies to the state it left
      nextState(this.id, this.state, 'seek');
      const staged = this.player.stage(index, positionNs);
      let next: SessionState;
      try {
        if (this.state === 'playing') await staged.read();
        next = nextState(this.id, this.state, 'seek');
      } catch (err) {
        staged.drop();
        throw err;
      }
      this.takeBack();
      this.player.seek(index, positionNs, staged);
      if (next === 'playing') this.start(next);
      else this.enter(next);
    });
  }

  /**
   * Runs the controls that read the store (play, seek) one after another, in
   * the order they came, so that a seek's answer never lands after a later
   * one's; pause and stop read nothing and act at once.
   */
  private inTurn(control: () => Promise<void>): Promise<void> {
    const run = this.turns.then(control);
    this.turns = run.catch(() => undefined);
    return run;
  }

  /** For daemon shutdown: a playing session pauses where it is, and its streams end. */
  shutdown(): void {
    if (this.state === 'playing') this.pause();
    this.broadcast.end();
    this.promptForMainWatchers();
  }

  /**
   * Sends the session's frames to `watcher` from now on, after one state
   * event; where the clock can write to the watcher's socket itself, it is
   * handed over, so its frames do not wait for the main thread. `from`: the
   * first event a resuming stream still needs (its history brought it the
   * ones before).
   */
  watch(watcher: Watcher, from = 0): void {
    const sockets = this.player.sockets;
    const first = sseFrame('state', this.json());
    // the clock writes frames before this thread hears of them, so a resuming client may have had
    // frames past `emitted`: it gets them from where it is, not twice
    const next = Math.max(from, this.player.emitted);
    // releases made meanwhile run after this: their frames and state events reach the watcher through the clock
    if (this.state !== 'stopped' && sockets && watcher.handOver?.(sockets, next, first)) {
      this.broadcast.add(watcher);
      return;
    }
    // this thread's frames start at `emitted`: a client past it ends here and resumes once it is not
    if (next > this.player.emitted) {
      watcher.end();
      return;
    }
    this.broadcast.add(watcher);
    this.promptForMainWatchers();
    watcher.write(first);
    if (this.state === 'stopped') this.unwatch(watcher, true);
  }

  unwatch(watcher: Watcher, end = false): void {
    this.broadcast.delete(watcher);
    this.promptForMainWatchers();
    if (end) watcher.end();
  }

  /** Releases are told at once while a stream the main thread writes (TLS) waits for them. */
  private promptForMainWatchers(): void {
    this.player.prompt(this.broadcast.mainWatchers > 0);
  }

  get watchers(): number {
    return this.broadcast.size;
  }

  /**
   * Frames of the events emitted before now from index `from` on, read again
   * from the store (no more than the live stream has passed) and framed
   * where they are read (a query worker): a page's frames as bytes (one
   * write, one step: a stream cut in a dense replay resumes 100,000 events
   * back); ends where the live stream is when each page is asked for.
   */
  async *history(from: number): AsyncGenerator<HistoryPage> {
    let slot = Math.floor(from / CHECKPOINT_EVERY);
    while (slot > 0 && !this.player.checkpoint(slot)) slot--;
    if (from >= this.player.emitted) return;
    const pages = this.transaction.history(
      this.player.checkpoint(slot),
      slot * CHECKPOINT_EVERY,
      from,
      () => this.player.emitted,
      (a, b) => this.latenessByIndex.slice(a, b),
      this.schedule,
    );
    for await (const page of pages) if (page.events > 0) yield { bytes: page.bytes, events: page.events };
  }

  snapshot(): SessionSnapshot {
    const playing = this.state === 'playing';
    const at = this.player.saved(playing);
    const lateness = this.lateness.snapshot();
    return {
      id: this.id,
      transaction_id: this.transaction.id,
      speed_factor: this.speedFactor,
      extra_latency_ns: this.extraLatencyNs,
      driving: this.driving,
      owner: this.owner,
      // a session playing when the daemon stops comes back paused where it was
      state: playing ? 'paused' : this.state,
      created_at: this.createdAt,
      updated_at: this.updatedAt,
      first_ts: String(this.transaction.firstTs),
      last_ts: String(this.transaction.lastTs),
      events_total: this.transaction.total,
      next_index: at.nextIndex,
      next_start: at.nextStart ? { ts: String(at.nextStart.ts), event_id: at.nextStart.eventId } : null,
      floor_ns: String(at.floorNs),
      position_ns: String(at.positionNs),
      wall_ns: String(at.wallNs),
      lateness: { max: lateness.max, buckets: lateness.buckets },
    };
  }

  static restore(saved: RestoredSession, transaction: Transaction, context: SessionContext): ReplaySession {
    const session = new ReplaySession(
      {
        id: saved.id,
        transaction,
        speedFactor: saved.speed_factor,
        extraLatencyNs: saved.extra_latency_ns,
        driving: saved.driving,
        owner: saved.owner,
      },
      context,
    );
    session.createdAt = saved.created_at;
    session.updatedAt = saved.updated_at;
    session.state = saved.state === 'playing' ? 'paused' : saved.state;
    session.player.restore({
      nextIndex: saved.next_index,
      nextStart: saved.next_start
        ? { ts: saved.next_start.ts, eventId: saved.next_start.event_id }
        : undefined,
      floorNs: saved.floor_ns,
      positionNs: saved.position_ns,
      wallNs: saved.wall_ns,
    });
    session.stats.restoreLateness(saved.lateness);
    session.toldReleased.set(session.stats.lateness.metricMark());
    return session;
  }

  private enter(state: SessionState): void {
    this.state = state;
    // only a playing session can be behind its schedule
    if (state !== 'playing') {
      this.stats.caughtUp();
      this.behind = false;
    }
    this.updatedAt = new Date(this.context.wall.nowMs()).toISOString();
    this.sendState();
    this.context.changed(this);
  }

  /** Takes the deadlines back from the clock, and emits the events it released before (they may finish the replay). */
  private takeBack(): void {
    for (const released of this.player.disarm()) this.emit(released);
  }

  /** Plays (`state`: playing) from the wall offset where the session is. */
  private start(state: SessionState): void {
    const playable = this.player.play();
    this.enter(state);
    if (!playable) this.finish();
  }

  private sendState(): void {
    this.broadcast.send(sseFrame('state', this.json()));
  }

  /**
   * Events the clock released (it kept their statistics and lateness): the
   * main thread's own streams get their frames, the metrics and the behind
   * state are looked at once, then the replay moves past them.
   */
  private emit({ count }: Released): void {
    if (count === 0) return;
    // the clock wrote them to the watchers it holds; the main thread's (TLS) get them from here
    if (this.broadcast.mainWatchers > 0) {
      const first = this.player.emitted;
      for (let index = first; index < first + count; index++) {
        const { frame, deadline } = this.player.released(index);
        this.broadcast.sendReplay(lateFrameText(frame, this.latenessByIndex.get(index)), deadline);
      }
    }
    this.tellMetrics();
    const behind = this.stats.behindNs > 0;
    if (behind !== this.behind) {
      this.behind = behind;
      this.sendState();
    }
    if (!this.player.advance(count)) this.finish();
  }

  /** The metrics learn what the clock added since they were last told. */
  private tellMetrics(): void {
    const timing = this.context.timing;
    if (!timing) return;
    timing.released(this.stats.lateness.metricSince(this.toldReleased));
    timing.delivered(this.stats.delivery.metricSince(this.toldDelivered));
  }

  private finish(): void {
    this.player.end();
    this.enter('finished');
  }
}
