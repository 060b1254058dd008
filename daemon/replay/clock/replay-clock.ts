/** The clock replay sessions are scheduled on: the high-resolution one, or a fake in tests. */

/** One session's deadlines, released in order on the main thread. */
export interface ClockLane {
  /** Calls `release` once monotonic time reaches `deadline`; a lane's deadlines must not decrease. */
  at(deadline: bigint, release: (releasedAt: bigint) => void): void;
  /** Forgets every deadline of the lane, releases already on their way included. */
  clear(): void;
}

export interface ReplayClock {
  /** Monotonic nanoseconds, the time base of deadlines. */
  now(): bigint;
  /** How far ahead the first of `count` deadlines handed over at once must be to be released on time. */
  leadNs(count: number): bigint;
  lane(): ClockLane;
  close(): Promise<void>;
}
