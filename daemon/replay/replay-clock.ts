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

/** Told when the clock released a deadline, and when it wrote its frame to the lane's sockets (null: it wrote none). */
export type Release = (releasedAt: bigint, writtenAt: bigint | null) => void;

/** A release the clock made before a clear, handed to whoever cleared the lane instead of being run. */
export interface Released {
  release: Release;
  releasedAt: bigint;
  writtenAt: bigint | null;
}

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

/** One session's deadlines, released in order on the main thread. */
export interface ClockLane {
  /** Calls `release` once monotonic time reaches `deadline`; a lane's deadlines must not decrease. */
  at(deadline: bigint, release: Release, frame?: LateFrame): void;
  /** Whether `frame` can be handed over now (the lane holds a bounded number of bytes of frames). */
  fits(frame: LateFrame): boolean;
  /**
   * Forgets every deadline of the lane not released yet, and returns, in
   * order, those released before whose releases have not run (their frames
   * may be out already): the caller runs them, or knows why not. `forGood`
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
  lane(): ClockLane;
  close(): Promise<void>;
}
