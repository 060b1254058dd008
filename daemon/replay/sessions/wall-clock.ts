/**
 * Wall time as sessions keep it (created_at, updated_at, and the TTLs that
 * run from updated_at): injectable like the replay clock, so that tests
 * move it instead of sleeping against real TTLs.
 */
export interface WallClock {
  /** Milliseconds since the Unix epoch. */
  nowMs(): number;
  /** Calls `fire` once nowMs() reaches `atMs` (at once if it has); returns what cancels it. */
  at(atMs: number, fire: () => void): () => void;
}

/** The longest delay setTimeout takes (2^31 − 1 ms, about 24.8 days): Node fires a longer one at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The system's wall clock; its timers do not keep the process alive. */
export const systemWallClock: WallClock = {
  nowMs: () => Date.now(),
  at(atMs, fire) {
    let timer: NodeJS.Timeout;
    // a TTL of days is waited out in steps
    const arm = () => {
      const remainingMs = atMs - Date.now();
      timer = setTimeout(
        () => (remainingMs > MAX_TIMER_MS ? arm() : fire()),
        Math.min(Math.max(0, remainingMs), MAX_TIMER_MS),
      ).unref();
    };
    arm();
    return () => clearTimeout(timer);
  },
};
