/**
 * The player of one replay session: reads the transaction a few events
 * ahead, hands their deadlines to the clock, and calls back as the clock
 * releases each one. The session owns what a release means (its state,
 * statistics and frames). Timing model: README, "Timing".
 */
import type { ReplayEvent } from '../replay-event';
import type { ClockLane, LaneSockets, LateFrame, ReplayClock } from '../replay-clock';
import type { Schedule } from './schedule';
import { Fifo } from '../fifo';
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

/** The clock released `entry` at `releasedAt`, for `deadline`, and wrote its frame at `writtenAt` (null: it did not). */
export interface Emitted {
  entry: Pending;
  deadline: bigint;
  releasedAt: bigint;
  writtenAt: bigint | null;
}

export type OnRelease = (emitted: Emitted) => void;

/** The replay frame of event `index`. */
export type RenderFrame = (index: number, event: ReplayEvent) => LateFrame;

export const startOf = (event: ReplayEvent): EventStart => ({
  ts: event.timestamp_ns,
  eventId: event.event_id,
});

export class Player {
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
    private readonly onRelease: OnRelease,
    private readonly render: RenderFrame,
    /** the reader ran out while nothing was left to release (the store had fewer events than counted) */
    private readonly onEnd: () => void,
  ) {
    this.lane = clock.lane();
  }

  /** Where the clock writes this session's frames itself, if it can. */
  get sockets(): LaneSockets | null {
    return this.lane.sockets;
  }

  /** The wall offset now, while playing. */
  wallNow(): bigint {
    // during the lead before the first deadline the replay has not moved: a pause then must not take it back
    const wall = this.clock.now() - this.anchor;
    return wall > this.startWallNs ? wall : this.startWallNs;
  }

  /** The next event to be released, if read. */
  head(): Pending | undefined {
    return this.pending.at(0);
  }

  /** Where event CHECKPOINT_EVERY × `slot` starts, once read. */
  checkpoint(slot: number): EventStart | undefined {
    return this.checkpoints[slot];
  }

  /**
   * Reads ahead from event `nextIndex` (at `nextStart`), then anchors wall
   * offset `wallNs` to now plus the clock's lead for what was read, so
   * reading ahead does not count against the schedule.
   */
  prepare(nextIndex: number, nextStart: EventStart | undefined, wallNs: bigint): void {
    this.readAhead(nextIndex, nextStart, wallNs + LOOKAHEAD_NS);
    this.anchor = this.clock.now() + this.clock.leadNs(this.pending.length) - wallNs;
    this.startWallNs = wallNs;
  }

  /** Hands every event read to the clock, as far as its lane has room; false when nothing is left to play. */
  armAll(): boolean {
    this.armed = 0;
    this.active = true;
    this.armMore();
    return this.pending.length > 0 || !this.exhausted;
  }

  /** After a release: reads and arms what is due within the lookahead; false when nothing is left. */
  refill(nextIndex: number, nextStart: EventStart | undefined): boolean {
    this.readAhead(nextIndex, nextStart, this.wallNow() + LOOKAHEAD_NS, READ_PER_REFILL);
    this.armMore();
    return this.pending.length > 0 || !this.exhausted;
  }

  /**
   * Starts reading from event `nextIndex` (at `nextStart`) if nothing is
   * read yet, so that a play soon after finds events read; resolves once
   * a lookahead's worth are (or all there are).
   */
  primed(nextIndex: number, nextStart: EventStart | undefined): Promise<void> {
    if (this.pending.length > 0) return Promise.resolve();
    // as many as a lookahead may take: a fast replay's first quarter second is read before it starts
    return this.readerFrom(nextIndex, nextStart).ready(MAX_LOOKAHEAD);
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
    const emitted = this.lane.clear().map(({ releasedAt, writtenAt }) => {
      const entry = this.pending.shift()!;
      return { entry, deadline: this.anchor + entry.dueNs, releasedAt, writtenAt };
    });
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
  private readAhead(
    nextIndex: number,
    nextStart: EventStart | undefined,
    horizonNs: bigint,
    most = MAX_LOOKAHEAD,
  ): void {
    const reader = this.readerFrom(nextIndex, nextStart);
    for (let read = 0; read < most && this.pending.length < MAX_LOOKAHEAD; read++) {
      const last = this.pending.at(this.pending.length - 1);
      if (last && this.pending.length >= MIN_LOOKAHEAD && last.dueNs > horizonNs) break;
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
        frame: this.render(index, event),
      };
      if (index % CHECKPOINT_EVERY === 0) this.checkpoints[index / CHECKPOINT_EVERY] = startOf(entry.event);
      this.pending.push(entry);
    }
  }

  /** The reader, made to start at event `nextIndex` (at `nextStart`) if there is none. */
  private readerFrom(nextIndex: number, nextStart: EventStart | undefined): EventCursor {
    if (this.reader) return this.reader;
    this.readIndex = nextIndex;
    const reader: EventCursor = this.transaction.cursor(nextStart, () => this.more(reader));
    this.reader = reader;
    return reader;
  }

  /** Events arrived for `reader` (read ahead asynchronously): while playing, they are read and armed. */
  private more(reader: EventCursor): void {
    if (reader !== this.reader || !this.active) return;
    this.readAhead(this.readIndex, undefined, this.wallNow() + LOOKAHEAD_NS, READ_PER_REFILL);
    this.armMore();
    if (this.pending.length === 0 && this.exhausted) this.onEnd();
  }

  /** While playing, hands the clock the events read and not yet armed, in order, while its lane has room for their frames. */
  private armMore(): void {
    if (!this.active) return;
    while (this.armed < this.pending.length) {
      const entry = this.pending.at(this.armed)!;
      if (!this.lane.fits(entry.frame)) return;
      const deadline = this.anchor + entry.dueNs;
      this.lane.at(
        deadline,
        (releasedAt, writtenAt) => {
          this.pending.shift();
          this.armed--;
          this.onRelease({ entry, deadline, releasedAt, writtenAt });
        },
        entry.frame,
      );
      this.armed++;
    }
  }
}
