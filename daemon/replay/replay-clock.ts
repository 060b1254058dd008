/** The clock replay sessions are scheduled on: the high-resolution one, or a fake in tests. */
import type { SocketClosed } from './clock/clock-wire';

/**
 * A replay frame whose lateness is known only at release: `head`, the
 * lateness in ns as digits, then `tail`. The clock writes it to the lane's
 * sockets itself where it can (LaneSockets).
 */
export interface LateFrame {
  /** the event's index in the replay */
  index: number;
  head: string;
  tail: string;
}

/**
 * The clock released the lane's next `count` deadlines (in the order they
 * were handed over) at `releasedAt`, and wrote their frames to the lane's
 * sockets at `writtenAt` (null: it wrote none). One report covers every
 * deadline of a lane due at one look of the clock, so the main thread's
 * work per report does not grow with a dense replay's events.
 */
export interface Released {
  count: number;
  releasedAt: bigint;
  writtenAt: bigint | null;
}

/** Told of the releases of a lane, in order. */
export type OnReleased = (released: Released) => void;

/** Why the clock closed a watcher's socket: its stream ended, it was cut for not reading, or the peer is gone. */
export type { SocketClosed };

/**
 * Streams whose replay frames the clock thread writes itself, at release,
 * whatever the main thread is busy with; everything else for them (state
 * events, heartbeats, the end) goes through here too, in order.
 */
export interface LaneSockets {
  /**
   * Hands the clock its own copy of socket `fd` (the caller has written
   * everything before): `first` goes out at once, then the frames of events
   * from `fromIndex` on. Returns the watcher's id.
   */
  attach(fd: number, fromIndex: number, first: string, onClosed: (reason: SocketClosed) => void): number;
  send(watcher: number, text: string): void;
  /** Closes the clock's copy once what it holds is written; onClosed('ended') follows. */
  end(watcher: number): void;
  /** The stream closed on the main thread's side: the clock closes its copy. */
  detach(watcher: number): void;
}

/** One session's deadlines, their releases told in order on the main thread (the lane's OnReleased). */
export interface ClockLane {
  /** Releases once monotonic time reaches `deadline`; a lane's deadlines must not decrease. */
  at(deadline: bigint, frame?: LateFrame): void;
  /** Whether `frame` can be handed over now (the lane holds a bounded number of deadlines and bytes of frames). */
  fits(frame: LateFrame): boolean;
  /**
   * Forgets every deadline of the lane not released yet, and returns, in
   * order, the releases made before that were not told yet (their frames
   * may be out already): the caller takes them, or knows why not. `forGood`
   * also frees what the lane holds for its frames.
   */
  clear(forGood?: boolean): Released[];
  /** Where the clock writes frames itself; null where the main thread writes them all. */
  readonly sockets: LaneSockets | null;
}

export interface ReplayClock {
  /** Monotonic nanoseconds, the time base of deadlines. */
  now(): bigint;
  /** How far ahead the first of `count` deadlines handed over at once must be to be released on time. */
  leadNs(count: number): bigint;
  /** A new lane, whose releases are told to `onReleased`. */
  lane(onReleased: OnReleased): ClockLane;
  close(): Promise<void>;
}
