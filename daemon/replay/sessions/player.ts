/**
 * The player of one replay session: owns where the replay stands (the next
 * event, the position, the wall offset), reads the transaction a few events
 * ahead, hands their deadlines to the clock, and tells its listener as the
 * clock releases each one. The session owns what a release means (its
 * state, statistics and streams). Timing model: README, "Timing".
 */
import type { ReplayEvent } from '../replay-event';
import type { ClockLane, LaneSockets, LateFrame, Released, ReplayClock } from '../replay-clock';
import type { Schedule } from './schedule';
import { Fifo } from '../fifo';
import { replayFrame } from './replay-frame';
import type { EventCursor, EventStart, Transaction } from './transaction';

/**
 * While playing, the events due within the next LOOKAHEAD_NS of wall time
 * are read and handed to the clock (at least MIN_LOOKAHEAD, at most
 * MAX_LOOKAHEAD events): the clock releases them on time even while the
 * main thread is busy serving requests for tens of milliseconds, and memory
 * stays bounded (at most ~7 MB per session, plus the frames the clock
 * holds, within its lane's ring) whatever the transaction's size.
 */
const LOOKAHEAD_NS = 250_000_000n;
const MIN_LOOKAHEAD = 64;
/**
 * Events one refill reads at most (one store chunk): the rest waits for the
 * next release, so that a dense replay's read-ahead comes in slices between
 * which the event loop serves requests.
 */
const READ_PER_REFILL = 256;
export const MAX_LOOKAHEAD = 16384;
/** Where every 1024th event starts, so a resuming stream re-reads at most 1023 events to find its place. */
export const CHECKPOINT_EVERY = 1024;

export interface Pending {
  index: number;
  event: ReplayEvent;
  /** recorded offset from the first event */
  offsetNs: bigint;
  /** scheduled wall offset */
  dueNs: bigint;
  /** its replay frame, built as it is read: the clock may write it itself */
  frame: LateFrame;
}

/**
 * The clock released `entries` (in order) at `releasedAt`, each due at
 * `anchor` + its dueNs, and wrote their frames at `writtenAt` (null: it
 * did not).
 */
export interface Emitted {
  entries: Pending[];
  anchor: bigint;
  releasedAt: bigint;
  writtenAt: bigint | null;
}

/** Who hears of releases: the session. */
export interface PlayerListener {
  /** the clock released events; the listener calls advance() with the last once it has emitted them */
  released(emitted: Emitted): void;
  /** the reader ran out while nothing was left to release (the store had fewer events than counted) */
  ended(): void;
}

/** Where a replay stands, as a session's snapshot keeps it across restarts. */
export interface PlayerPosition {
  nextIndex: number;
  nextStart: EventStart | undefined;
  floorNs: bigint;
  positionNs: bigint;
  wallNs: bigint;
}

export const startOf = (event: ReplayEvent): EventStart => ({
  ts: event.timestamp_ns,
  eventId: event.event_id,
});

export class Player {
  /** index of the next event to emit: events_emitted */
  private nextIndex = 0;
  /** where a fresh reader starts (undefined: the first event) */
  private nextStart: EventStart | undefined;
  /** the position can't fall below this: the last emitted event's offset, or the sought position */
  private floorNs = 0n;
  /** position and wall offset while not playing */
  private positionNs = 0n;
  private wallNs = 0n;
  /** while playing, wall offset = now − anchor, and never less than where the play started */
  private anchor = 0n;
  private startWallNs = 0n;
  private reader: EventCursor | null = null;
  /** the reader has no more events */
  private exhausted = false;
  /** the index of the next event the reader gives */
  private readIndex = 0;
  /** deadlines are handed to the clock (playing): events read later are armed as they come */
  private active = false;
  /** events read and not yet released, from the session's next index on */
  private readonly pending = new Fifo<Pending>();
  /** how many of `pending` (from the first) are in the clock's hands */
  private armed = 0;
  private readonly checkpoints: EventStart[] = [];
  private readonly lane: ClockLane;

  constructor(
    private readonly transaction: Transaction,
    private readonly schedule: Schedule,
    private readonly clock: ReplayClock,
    private readonly listener: PlayerListener,
  ) {
    this.lane = clock.lane((released) => {
      this.armed -= released.count;
      this.listener.released(this.take(released));
    });
  }

  /** The next `count` events of `pending`, released as `released` says. */
  private take({ count, releasedAt, writtenAt }: Released): Emitted {
    const entries: Pending[] = [];
    for (let i = 0; i < count; i++) entries.push(this.pending.shift()!);
    return { entries, anchor: this.anchor, releasedAt, writtenAt };
  }

  /** Events emitted so far: the index of the next. */
  get emitted(): number {
    return this.nextIndex;
  }

  /** The recorded offset reached (`playing`: moving with the wall clock). */
  position(playing: boolean): bigint {
    return playing ? this.livePosition(this.wallNow()) : this.positionNs;
  }

  /** Wall time the replay still needs, were it playing from here (for Retry-After). */
  remainingNs(playing: boolean): bigint {
    const end = this.schedule.wallOffset(this.transaction.total - 1, this.transaction.durationNs);
    const wall = playing ? this.wallNow() : this.wallNs;
    return end > wall ? end - wall : 0n;
  }

  /** Keeps the wall offset and position where they are now (the replay stops moving). */
  freeze(): void {
    this.wallNs = this.wallNow();
    this.positionNs = this.livePosition(this.wallNs);
  }

  /**
   * Continues from event `index`, the first at or after recorded offset
   * `positionNs`; `reader`, if given, reads from there already.
   */
  seek(index: number, positionNs: bigint, reader?: EventCursor): void {
    this.drop();
    this.nextIndex = index;
    this.nextStart = { ts: this.transaction.firstTs + positionNs };
    if (reader) this.adopt(reader);
    this.floorNs = this.positionNs = positionNs;
    this.wallNs = this.schedule.wallOffset(index, positionNs);
  }

  /** Every event emitted: the replay stands at its end. */
  end(): void {
    this.drop();
    this.nextIndex = this.transaction.total;
    this.floorNs = this.positionNs = this.transaction.durationNs;
  }

  /**
   * Event `entry` was emitted: the replay moves past it and reads on. False
   * when nothing is left to play.
   */
  advance(entry: Pending): boolean {
    this.nextIndex = entry.index + 1;
    this.floorNs = entry.offsetNs;
    return this.nextIndex < this.transaction.total && this.refill();
  }

  /** Where the replay stands (`playing`: now), for the session's snapshot. */
  saved(playing: boolean): PlayerPosition {
    const wallNs = playing ? this.wallNow() : this.wallNs;
    const head = this.head();
    return {
      nextIndex: this.nextIndex,
      nextStart: head ? startOf(head.event) : this.nextStart,
      floorNs: this.floorNs,
      positionNs: playing ? this.livePosition(wallNs) : this.positionNs,
      wallNs,
    };
  }

  /** Stands where a saved session stood (it comes back paused). */
  restore(saved: PlayerPosition): void {
    ({
      nextIndex: this.nextIndex,
      nextStart: this.nextStart,
      floorNs: this.floorNs,
      positionNs: this.positionNs,
      wallNs: this.wallNs,
    } = saved);
    this.nextIndex = Math.min(this.nextIndex, this.transaction.total);
  }

  private livePosition(wallNs: bigint): bigint {
    const ceiling = this.head()?.offsetNs ?? this.transaction.durationNs;
    return this.schedule.position(wallNs, this.nextIndex, this.floorNs, ceiling);
  }

  /** Where the clock writes this session's frames itself, if it can. */
  get sockets(): LaneSockets | null {
    return this.lane.sockets;
  }

  /** The wall offset now, while playing. */
  private wallNow(): bigint {
    // during the lead before the first deadline the replay has not moved: a pause then must not take it back
    const wall = this.clock.now() - this.anchor;
    return wall > this.startWallNs ? wall : this.startWallNs;
  }

  /** The next event to be released, if read. */
  private head(): Pending | undefined {
    return this.pending.at(0);
  }

  /** Where event CHECKPOINT_EVERY × `slot` starts, once read. */
  checkpoint(slot: number): EventStart | undefined {
    return this.checkpoints[slot];
  }

  /**
   * Plays from where the replay stands: reads ahead, anchors the wall
   * offset to now plus the clock's lead for what was read (so reading ahead
   * does not count against the schedule), and hands every event read to the
   * clock, as far as its lane has room. False when nothing is left to play.
   */
  play(): boolean {
    this.readAhead(this.wallNs + LOOKAHEAD_NS);
    this.anchor = this.clock.now() + this.clock.leadNs(this.pending.length) - this.wallNs;
    this.startWallNs = this.wallNs;
    this.armed = 0;
    this.active = true;
    this.armMore();
    return this.pending.length > 0 || !this.exhausted;
  }

  /** After a release: reads and arms what is due within the lookahead; false when nothing is left. */
  private refill(): boolean {
    this.readAhead(this.wallNow() + LOOKAHEAD_NS, READ_PER_REFILL);
    this.armMore();
    return this.pending.length > 0 || !this.exhausted;
  }

  /**
   * Reads from where the replay stands until a lookahead's worth is read
   * (what play() would read: a fast replay's first quarter second) or all
   * there is, so that a play finds its first events in hand; rejects when
   * the store fails meanwhile.
   */
  async primed(): Promise<void> {
    const reader = this.readerFrom();
    const horizon = this.wallNs + LOOKAHEAD_NS;
    for (;;) {
      this.readAhead(horizon);
      if (this.exhausted || this.covered(horizon)) return;
      await reader.ready();
      // dropped meanwhile (a seek, a stop): whoever moved it reads on
      if (reader !== this.reader) return;
    }
  }

  /**
   * Takes back every deadline handed to the clock; what was read stays.
   * Returns, in order, the events the clock released before whose releases
   * had not run (their frames may be out): the caller emits them. Nothing
   * is armed meanwhile.
   */
  disarm(): Emitted[] {
    this.active = false;
    // the deadlines are released in the order they were armed: the first of `pending`
    const emitted = this.lane.clear().map((released) => this.take(released));
    this.armed = 0;
    return emitted;
  }

  /**
   * Forgets the reader and what it read: the next prepare reads from a new
   * start. Releases not yet run are forgotten too: disarm() first to keep them.
   */
  drop(): void {
    this.active = false;
    this.lane.clear(true);
    this.reader?.close();
    this.reader = null;
    this.exhausted = false;
    this.pending.clear();
    this.armed = 0;
  }

  /** Reads events (`most` at most) until one is due after wall offset `horizonNs`, within the lookahead's bounds. */
  private readAhead(horizonNs: bigint, most = MAX_LOOKAHEAD): void {
    const reader = this.readerFrom();
    for (let read = 0; read < most && !this.covered(horizonNs); read++) {
      const event = reader.next();
      if (event === undefined) break;
      if (event === null) {
        this.exhausted = true;
        break;
      }
      const index = this.readIndex++;
      const offsetNs = event.timestamp_ns - this.transaction.firstTs;
      const entry = {
        index,
        event,
        offsetNs,
        dueNs: this.schedule.wallOffset(index, offsetNs),
        frame: replayFrame(this.schedule, this.transaction.firstTs, index, event),
      };
      if (index % CHECKPOINT_EVERY === 0) this.checkpoints[index / CHECKPOINT_EVERY] = startOf(entry.event);
      this.pending.push(entry);
    }
  }

  /** Enough is read: every event due up to wall offset `horizonNs` (at least MIN_LOOKAHEAD), or MAX_LOOKAHEAD. */
  private covered(horizonNs: bigint): boolean {
    const last = this.pending.at(this.pending.length - 1);
    if (this.pending.length >= MAX_LOOKAHEAD) return true;
    return last !== undefined && this.pending.length >= MIN_LOOKAHEAD && last.dueNs > horizonNs;
  }

  /** The reader, made to start where the replay stands if there is none. */
  private readerFrom(): EventCursor {
    return this.reader ?? this.adopt(this.transaction.cursor(this.nextStart));
  }

  /** Reads on with `reader`, which starts where the replay stands. */
  private adopt(reader: EventCursor): EventCursor {
    this.readIndex = this.nextIndex;
    reader.onReady = () => this.more(reader);
    this.reader = reader;
    return reader;
  }

  /** Events arrived for `reader` (read ahead asynchronously): while playing, they are read and armed. */
  private more(reader: EventCursor): void {
    if (reader !== this.reader || !this.active) return;
    this.readAhead(this.wallNow() + LOOKAHEAD_NS, READ_PER_REFILL);
    this.armMore();
    if (this.pending.length === 0 && this.exhausted) this.listener.ended();
  }

  /** While playing, hands the clock the events read and not yet armed, in order, while its lane has room for their frames. */
  private armMore(): void {
    if (!this.active) return;
    while (this.armed < this.pending.length) {
      const entry = this.pending.at(this.armed)!;
      if (!this.lane.fits(entry.frame)) return;
      this.lane.at(this.anchor + entry.dueNs, entry.frame);
      this.armed++;
    }
  }
}
