/**
 * A session's release statistics in shared memory: how late the clock
 * released each event, how late its frame reached the sockets, and whether
 * the replay is behind its schedule. The clock thread adds every release
 * (ClockCore, or the fake clock in tests); the main thread only reads, when
 * a session's record is asked for or at most once per report of the clock,
 * so it does no work per event.
 */
import { TIMING_WORDS, TimingStats } from './timing-stats';

/**
 * Releases later than this mean the clock cannot keep up (speed 1000 on
 * dense events, a starved machine): the session says so with `behind_ns`
 * and a state event, and again when releases are back within CAUGHT_UP_NS.
 */
export const BEHIND_AFTER_NS = 10_000_000;
const CAUGHT_UP_NS = 1_000_000;

const LATENESS_AT = 0;
const DELIVERY_AT = TIMING_WORDS;
/** lateness of the latest release while behind, else 0 */
const BEHIND = 2 * TIMING_WORDS;
const WORDS = BEHIND + 1;

export class ReleaseStats {
  readonly lateness: TimingStats;
  readonly delivery: TimingStats;
  private readonly words: Float64Array;

  constructor(readonly shared = new SharedArrayBuffer(WORDS * Float64Array.BYTES_PER_ELEMENT)) {
    this.words = new Float64Array(shared);
    this.lateness = new TimingStats(this.words.subarray(LATENESS_AT, LATENESS_AT + TIMING_WORDS));
    this.delivery = new TimingStats(this.words.subarray(DELIVERY_AT, DELIVERY_AT + TIMING_WORDS));
  }

  /** The clock released an event `late` ns after its deadline. */
  released(late: number): void {
    this.lateness.add(late);
    const behind = this.words[BEHIND]! > 0;
    if (behind ? late > CAUGHT_UP_NS : late > BEHIND_AFTER_NS) this.words[BEHIND] = late;
    else if (behind) this.words[BEHIND] = 0;
  }

  /** Lateness of the latest release while the replay is behind, else 0. */
  get behindNs(): number {
    return this.words[BEHIND]!;
  }

  /** Not playing: not behind. */
  caughtUp(): void {
    this.words[BEHIND] = 0;
  }

  /** The lateness statistics as a session file kept them (delivery is not kept). */
  restoreLateness(snapshot: Parameters<typeof TimingStats.restore>[0]): void {
    TimingStats.restore(snapshot, this.words.subarray(LATENESS_AT, LATENESS_AT + TIMING_WORDS));
  }
}
