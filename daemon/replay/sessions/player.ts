/**
 * The player of one replay session: owns where the replay stands (the next
 * event, the position, the wall offset), has the transaction read ahead as
 * frames into a buffer the clock plays (ReadAhead: a query worker writes
 * them), and tells its listener as the clock releases them, a count at a
 * time. The session owns what a release means (its state and streams); the
 * clock keeps the statistics. Nothing here runs per event. Timing model:
 * docs/replay.md, "Timing".
 */
import type { ClockLane, Released, ReplayClock } from '../replay-clock';
import type { LateFrame } from '../lane/replay-frame';
import type { LaneSockets } from '../replay-clock';
import type { LatenessLog } from '../lateness-log';
import type { ReleaseStats } from '../release-stats';
import { ReadAhead } from './read-ahead';
import type { Schedule } from '../../../core/replay/schedule';
import { PREFETCH_CHUNK, type EventStart, type Transaction } from './transaction';

/**
 * While playing, the events due within the next LOOKAHEAD_NS of wall time
 * are read ahead and handed to the clock (at least MIN_LOOKAHEAD, at most
 * what the buffer holds: its records and bytes): the clock
 * releases them on time even while the main thread is busy, and memory
 * stays bounded whatever the transaction's size. A dense replay keeps
 * PRIME_NS read ahead instead, in its large buffer: with a lookahead in
 * hand, a stall of the main thread or of a worker longer than it (a
 * collection, a burst of pages) released a 3 s transaction at 100,000
 * events a second 125–430 ms late on a 2-core host.
 */
export const LOOKAHEAD_NS = 250_000_000n;
/**
 * A play starts once a lookahead (LOOKAHEAD_NS) is read, if it was read
 * faster than it plays (READ_MARGIN); otherwise once PRIME_NS of wall
 * time is read (or the buffer is full): a query worker writes ~250,000
 * frames a second, so a denser replay could not be read as fast as it
 * plays; with its first second in the clock's hands it is (tcpreplay's
 * preload, bounded by the buffer).
 */
export const PRIME_NS = 1_000_000_000n;
const READ_MARGIN = 1;
/** A replay playing more events than this in PRIME_NS takes the clock's large buffer (frames of ~470 bytes). */
const DENSE_EVENTS = 32_768;
const MIN_LOOKAHEAD = 64;
/** A read that failed (the workers busy, say) is tried again after this, doubling up to the max. */
const RETRY_MS = 50;
const MAX_RETRY_MS = 2000;

/** Who hears of releases: the session. */
export interface PlayerListener {
  /** the clock released the next `count` events; the listener calls advance() once it has emitted them */
  released(released: Released): void;
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

export class Player {
  /** index of the next event to emit: events_emitted */
  private nextIndex = 0;
  /** where a fresh read starts (undefined: the first event) */
  private nextStart: EventStart | undefined;
  /** the position can't fall below this: the last emitted event's offset, or the sought position */
  private floorNs = 0n;
  /** position and wall offset while not playing */
  private positionNs = 0n;
  private wallNs = 0n;
  /** while playing, wall offset = now − anchor, and never less than where the play started */
  private anchor = 0n;
  private startWallNs = 0n;
  /** the frames read ahead from the next event on (null: none read since the last move) */
  private ahead: ReadAhead | null = null;
  /** the records are the clock's (playing) */
  private active = false;
  private retryMs = RETRY_MS;
  private retry: NodeJS.Timeout | null = null;
  private readonly checkpoints: EventStart[] = [];
  private readonly lane: ClockLane;
  /** the replay plays more than DENSE_EVENTS a PRIME_NS: it takes the large buffer, and its play waits for PRIME_NS read */
  private dense = false;

  constructor(
    private readonly transaction: Transaction,
    private readonly schedule: Schedule,
    private readonly clock: ReplayClock,
    private readonly listener: PlayerListener,
    private readonly stats: ReleaseStats,
    private readonly log: LatenessLog,
  ) {
    this.lane = clock.lane((released) => this.listener.released(released));
    this.lane.keep(stats, []);
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

  /** Frames read from event `index`, the first at or after recorded offset `positionNs`, for seek(). */
  stage(index: number, positionNs: bigint): ReadAhead {
    return this.readAt(index, { ts: this.transaction.firstTs + positionNs });
  }

  /** Frames read from event `index`, which starts at `start`, into a new buffer: the large one if the replay plays more than DENSE_EVENTS a PRIME_NS on average. */
  private readAt(index: number, start: EventStart | undefined): ReadAhead {
    const { total } = this.transaction;
    const wallNs = this.schedule.wallOffset(total - 1, this.transaction.durationNs) + 1n;
    this.dense = BigInt(total) * PRIME_NS > BigInt(DENSE_EVENTS) * wallNs;
    const buffer = this.clock.frameBuffer(this.dense);
    return ReadAhead.from(this.transaction, this.schedule, buffer, index, start, this.checkpoints);
  }

  /** Continues from event `index`, the first at or after recorded offset `positionNs`; `staged` reads from there already. */
  seek(index: number, positionNs: bigint, staged?: ReadAhead): void {
    this.drop();
    this.nextIndex = index;
    this.nextStart = { ts: this.transaction.firstTs + positionNs };
    this.ahead = staged ?? null;
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
   * The next `count` events were emitted: the replay moves past them and
   * reads on. False when nothing is left to play.
   */
  advance(count: number): boolean {
    this.nextIndex += count;
    const ahead = this.ahead;
    if (ahead && ahead.buffer.taken > 0)
      this.floorNs = BigInt(ahead.buffer.field(ahead.buffer.taken - 1, 'recorded'));
    if (this.nextIndex >= this.transaction.total) return false;
    this.readAhead();
    return !ahead || ahead.buffer.pending > 0 || !ahead.exhausted;
  }

  /** Where the replay stands (`playing`: now), for the session's snapshot. */
  saved(playing: boolean): PlayerPosition {
    const wallNs = playing ? this.wallNow() : this.wallNs;
    return {
      nextIndex: this.nextIndex,
      nextStart: this.headStart() ?? this.nextStart,
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

  /** Where the next event to release starts, if it is read. */
  private headStart(): EventStart | undefined {
    const buffer = this.ahead?.buffer;
    if (!buffer || buffer.pending === 0) return undefined;
    return {
      ts: this.transaction.firstTs + BigInt(buffer.field(buffer.taken, 'recorded')),
      eventId: buffer.eventId(buffer.taken),
    };
  }

  private livePosition(wallNs: bigint): bigint {
    const buffer = this.ahead?.buffer;
    const ceiling =
      buffer && buffer.pending > 0
        ? BigInt(buffer.field(buffer.taken, 'recorded'))
        : this.transaction.durationNs;
    return this.schedule.position(wallNs, this.nextIndex, this.floorNs, ceiling);
  }

  /** Whether streams the main thread writes (TLS) wait for this session's releases: they are told at once, not in aggregate. */
  prompt(on: boolean): void {
    this.lane.prompt(on);
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

  /** Where every CHECKPOINT_EVERY-th event starts, once read. */
  checkpoint(slot: number): EventStart | undefined {
    return this.checkpoints[slot];
  }

  /** Event `index`'s frame and deadline, while its record is in the buffer (just released): for the main thread's own streams. */
  released(index: number): { frame: LateFrame; deadline: bigint } {
    const ahead = this.ahead!;
    const n = index - ahead.start;
    return { frame: ahead.buffer.frame(n), deadline: this.anchor + BigInt(ahead.buffer.field(n, 'due')) };
  }

  /**
   * Plays from where the replay stands: anchors the wall offset to now plus
   * the clock's lead, and hands the clock what was read (primed() read a
   * lookahead's worth first). False when nothing is left to play.
   */
  play(): boolean {
    const ahead = this.readFrom();
    this.startWallNs = this.wallNs;
    this.active = true;
    this.handPages();
    this.lane.play(ahead.buffer, () => {
      this.anchor = this.clock.now() + this.clock.leadNs() - this.wallNs;
      return this.anchor;
    });
    this.readAhead();
    return ahead.buffer.pending > 0 || !ahead.exhausted;
  }

  /**
   * Reads from where the replay stands until the reads are ahead for good
   * (see PRIME_NS), or all there is, or what the buffer holds, so that a
   * play finds its first events in hand; rejects when the store fails
   * meanwhile.
   */
  async primed(): Promise<void> {
    const ahead = this.readFrom();
    const started = this.clock.now();
    while (ahead === this.ahead && this.wants(ahead, this.wallNs + PRIME_NS)) {
      // a lookahead is in hand: go if it was read fast enough that the reads keep ahead from here
      const readAheadNs = ahead.buffer.lastDue - Number(this.wallNs);
      const tookNs = Number(this.clock.now() - started);
      if (!this.dense && !this.wants(ahead, this.wallNs + LOOKAHEAD_NS) && readAheadNs > READ_MARGIN * tookNs)
        return;
      await ahead.read();
    }
  }

  /**
   * Takes the deadlines back from the clock; what was read stays for the
   * next play. Returns, in order, the releases the clock made before whose
   * releases had not run (their frames may be out): the caller emits them.
   */
  disarm(): Released[] {
    this.active = false;
    return this.lane.clear();
  }

  /** Forgets what was read: the next play reads from a new start. Releases not yet run are forgotten too: disarm() first to keep them. */
  drop(): void {
    this.active = false;
    this.lane.clear(true);
    this.ahead?.drop();
    this.ahead = null;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
  }

  /** The frames read ahead from where the replay stands, started if there are none. */
  private readFrom(): ReadAhead {
    this.ahead ??= this.readAt(this.nextIndex, this.nextStart);
    return this.ahead;
  }

  /**
   * More is wanted: the reader has more, the buffer has room for a page (a
   * page that does not fit is read again from where it stopped), and less
   * than the lookahead up to `horizonNs` is read.
   */
  private wants(ahead: ReadAhead, horizonNs: bigint): boolean {
    const { buffer } = ahead;
    if (ahead.exhausted || buffer.full || !buffer.roomFor(buffer.tail === 0 ? 1 : PREFETCH_CHUNK))
      return false;
    return buffer.pending < MIN_LOOKAHEAD || buffer.lastDue <= Number(horizonNs);
  }

  /** While playing: reads on if more is wanted, then hands the clock what came (one command a page). */
  private readAhead(): void {
    const ahead = this.ahead;
    if (
      !ahead ||
      !this.active ||
      ahead.reading ||
      this.retry ||
      !this.wants(ahead, this.wallNow() + (this.dense ? PRIME_NS : LOOKAHEAD_NS))
    )
      return;
    ahead.read().then(
      () => {
        this.retryMs = RETRY_MS;
        if (ahead !== this.ahead || !this.active) return;
        this.handPages();
        this.lane.publish();
        if (ahead.buffer.pending === 0 && ahead.exhausted) return this.listener.ended();
        this.readAhead();
      },
      (err: unknown) => {
        if (ahead !== this.ahead) return;
        // a playing replay must not stop on a busy pool or a slow query: it falls behind and says so instead
        this.transaction.log.warn('replay read-ahead failed; trying again', {
          error: (err as Error).message,
          retryMs: this.retryMs,
        });
        this.retry = setTimeout(() => {
          this.retry = null;
          this.readAhead();
        }, this.retryMs).unref();
        this.retryMs = Math.min(MAX_RETRY_MS, this.retryMs * 2);
      },
    );
  }

  /** Makes the lateness pages the records read reach, and hands them to the clock (one per 65,536 events). */
  private handPages(): void {
    const ahead = this.ahead;
    if (!ahead || ahead.buffer.tail === 0) return;
    const pages = this.log.ensure(ahead.nextIndex - 1);
    if (pages.length > 0) this.lane.keep(this.stats, pages);
  }
}
