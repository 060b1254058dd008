/** The clock replay sessions are scheduled on: the high-resolution one, or a fake in tests. */
import type { SocketClosed } from './clock/clock-wire';
import type { FrameBuffer } from './lane/frame-buffer';
import type { ReleaseStats } from './release-stats';

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

/**
 * One session's deadlines: the records of a FrameBuffer (written by the
 * read-ahead), each due at the lane's anchor plus its own wall offset; their
 * releases are told in order on the main thread (the lane's OnReleased),
 * after the lane has taken them from the buffer (FrameBuffer.take).
 */
export interface ClockLane {
  /**
   * Releases `buffer`'s records from the first not taken up to its tail, each
   * at the anchor + its due time; a buffer other than the lane's replaces it.
   * `anchor()` is taken once the clock has all else it needs (the buffer, the
   * statistics, the lateness pages), just before the command that carries
   * it, so that the lead it gives the first deadline is not spent on them.
   */
  play(buffer: FrameBuffer, anchor: () => bigint): void;
  /** Records written to the playing buffer since: they may be released too. */
  publish(): void;
  /** Where the clock keeps the session's release statistics and each event's lateness (pages as the replay reaches them). */
  keep(stats: ReleaseStats, pages: { page: number; shared: SharedArrayBuffer }[]): void;
  /**
   * Releases nothing more (the records stay in the buffer for the next
   * play), and returns, in order, the releases made before that were not
   * told yet (their frames may be out already; the lane took them from the
   * buffer): the caller takes them, or knows why not. `forGood` also lets go
   * of the buffer.
   */
  clear(forGood?: boolean): Released[];
  /**
   * `on`: the main thread writes frames of this lane itself (a TLS stream),
   * so its releases are told as they come rather than in aggregate.
   */
  prompt(on: boolean): void;
  /** Where the clock writes frames itself; null where the main thread writes them all. */
  readonly sockets: LaneSockets | null;
}

export interface ReplayClock {
  /** Monotonic nanoseconds, the time base of deadlines. */
  now(): bigint;
  /** How far ahead of a play its first deadline must be to be released on time (the commands' way to the clock). */
  leadNs(): bigint;
  /** A new lane, whose releases are told to `onReleased`. */
  lane(onReleased: OnReleased): ClockLane;
  /** A buffer for a session's frames, large for a `dense` replay (one of its size given back by a lane cleared for good, if any). */
  frameBuffer(dense: boolean): FrameBuffer;
  close(): Promise<void>;
}
