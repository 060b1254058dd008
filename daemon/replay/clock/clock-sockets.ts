/**
 * The clock thread's side of the event streams it writes itself: replay
 * frames go to each watcher's socket the moment their deadline is released,
 * so their delivery does not wait for the main thread, however busy it is
 * serving queries. The main thread hands over a duplicate of the socket's
 * descriptor once the stream's headers and history are out, and from then
 * on writes to it only through here (SEND), in order with the frames.
 *
 * Frames sit in the lane's byte ring (shared memory the main thread fills
 * when it reads ahead), each with the offset where its lateness goes, since
 * that is known only at release. A socket that cannot take a write keeps the
 * rest here, within SEND_BUFFER's limits, and is retried each turn of the
 * clock's loop; past the limits it is cut, and the client resumes with
 * Last-Event-ID. The main thread closes the descriptor once told the
 * watcher is closed here (Node warns of descriptors a worker closes).
 */
import type { SendBufferLimits } from '../send-buffer';
import { CLOSE_REASON } from './clock-wire';
import { FRAME, FRAME_WIDTH, RING } from '../lane/lane-layout';
import { FloatList, type Floats } from './float-list';

/** Iovecs per writev (IOV_MAX is 1024). */
const IOV_MAX = 1023;

type Fs = typeof import('node:fs');

interface SocketWatcher {
  fd: number;
  /** bytes the socket did not take yet, copied out of the ring */
  pending: Uint8Array[];
  pendingBytes: number;
  /** when a write last moved bytes, or when bytes started waiting */
  progressAt: number;
  ending: boolean;
}

interface Outlet {
  bytes: Buffer | null;
  header: Int32Array | null;
  watchers: Map<number, SocketWatcher>;
  /** frames released, FRAME_WIDTH + 1 (lateness) numbers each, from `releasedFrom` on not yet taken by the main thread */
  released: FloatList;
  releasedFrom: number;
}

export type ReportClosed = (lane: number, watcherId: number, reason: number) => void;

/* istanbul ignore next: runs in the clock thread (see clock-thread.ts) */
export function clockSockets(
  fs: Fs,
  limits: SendBufferLimits,
  now: () => number,
  reportClosed: ReportClosed,
) {
  const outlets = new Map<number, Outlet>();
  /** watchers with bytes waiting, or waiting to end */
  const backlog = new Map<SocketWatcher, { lane: number; id: number }>();

  const outlet = (lane: number): Outlet => {
    let found = outlets.get(lane);
    if (!found) {
      found = { bytes: null, header: null, watchers: new Map(), released: new FloatList(), releasedFrom: 0 };
      outlets.set(lane, found);
    }
    return found;
  };

  const close = (lane: number, id: number, watcher: SocketWatcher, reason: number): void => {
    outlets.get(lane)?.watchers.delete(id);
    backlog.delete(watcher);
    reportClosed(lane, id, reason);
  };

  /**
   * Bytes `views` hold past their first `skip`: copied from the ring (its
   * bytes get overwritten), taken as they are from what waits already.
   */
  const rest = (views: Uint8Array[], skip: number, copy: boolean): Uint8Array[] => {
    const out: Uint8Array[] = [];
    for (const view of views) {
      if (skip >= view.length) {
        skip -= view.length;
        continue;
      }
      const tail = view.subarray(skip);
      out.push(copy ? Buffer.from(tail) : tail);
      skip = 0;
    }
    return out;
  };

  /** Writes as much of `views` as the socket takes now: bytes written, or -1 once the peer is gone. */
  const writeNow = (fd: number, views: Uint8Array[]): number => {
    let written = 0;
    for (let i = 0; i < views.length; i += IOV_MAX) {
      const chunk = views.slice(i, i + IOV_MAX);
      let size = 0;
      for (const view of chunk) size += view.length;
      let n: number;
      try {
        n = fs.writevSync(fd, chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return written;
        return -1;
      }
      written += n;
      if (n < size) return written;
    }
    return written;
  };

  /** Tries the watcher's waiting bytes, then applies the limits: closed, or kept in the backlog while bytes wait. */
  const drainWatcher = (lane: number, id: number, watcher: SocketWatcher): void => {
    if (watcher.pendingBytes > 0) {
      const n = writeNow(watcher.fd, watcher.pending);
      if (n < 0) return close(lane, id, watcher, CLOSE_REASON.gone);
      if (n > 0) {
        watcher.progressAt = now();
        watcher.pending = rest(watcher.pending, n, false);
        watcher.pendingBytes -= n;
      }
    }
    if (watcher.pendingBytes === 0) {
      if (watcher.ending) close(lane, id, watcher, CLOSE_REASON.ended);
      return;
    }
    const stalled =
      watcher.pendingBytes > limits.softBytes && now() - watcher.progressAt > limits.stallMs * 1e6;
    if (watcher.pendingBytes > limits.hardBytes || stalled) return close(lane, id, watcher, CLOSE_REASON.cut);
    backlog.set(watcher, { lane, id });
  };

  /** Sends `views` to one watcher after what it has waiting. */
  const deliver = (
    lane: number,
    id: number,
    watcher: SocketWatcher,
    views: Uint8Array[],
    size: number,
  ): void => {
    if (watcher.pendingBytes === 0) {
      const n = writeNow(watcher.fd, views);
      if (n < 0) return close(lane, id, watcher, CLOSE_REASON.gone);
      if (n === size) return;
      watcher.pending = rest(views, n, true);
      watcher.pendingBytes = size - n;
      watcher.progressAt = n > 0 ? now() : watcher.progressAt;
    } else {
      watcher.pending.push(...rest(views, 0, true));
      watcher.pendingBytes += size;
    }
    drainWatcher(lane, id, watcher);
  };

  /** where released frames are packed with their lateness: reused, so a release allocates nothing but for a socket that lags */
  let packed = Buffer.alloc(64 << 10);

  /** Writes `n` (a non-negative integer) in decimal at `at` of `packed`; returns where it ends. */
  const writeDigits = (n: number, at: number): number => {
    let digits = 1;
    for (let rest = n; rest >= 10; rest = Math.floor(rest / 10)) digits++;
    for (let i = at + digits - 1, rest = n; i >= at; i--, rest = Math.floor(rest / 10))
      packed[i] = 48 + (rest % 10);
    return at + digits;
  };

  /**
   * Frames [from, to) of `frames` (FRAME_WIDTH numbers each) with their
   * lateness spliced in, packed into one view of `packed` (valid until the
   * next call): one copy of each frame and one write per watcher, however
   * many frames a look releases.
   */
  const packFrames = (bytes: Buffer, frames: Floats, from: number, to: number, late: Floats): Uint8Array => {
    let size = 0;
    // a lateness has at most 16 digits (below 2^53)
    for (let i = from; i < to; i++) size += frames.get(i * FRAME_WIDTH + FRAME.length) + 16;
    if (size > packed.length) packed = Buffer.alloc(2 ** Math.ceil(Math.log2(size)));
    let at = 0;
    for (let i = from; i < to; i++) {
      const frame = i * FRAME_WIDTH;
      const length = frames.get(frame + FRAME.length);
      if (length === 0) continue; // a deadline without a frame
      const start = RING.dataOffset + frames.get(frame + FRAME.offset);
      const latePos = start + frames.get(frame + FRAME.latenessAt);
      at += bytes.copy(packed, at, start, latePos);
      at = writeDigits(late.get(i), at);
      at += bytes.copy(packed, at, latePos, start + length);
    }
    return packed.subarray(0, at);
  };

  return {
    /** The lane's ring, posted by the main thread before its first frame. */
    buffer(lane: number, ring: SharedArrayBuffer): void {
      const target = outlet(lane);
      target.bytes = Buffer.from(ring);
      target.header = new Int32Array(ring, 0, RING.headerWords);
    },

    /**
     * A new watcher of `lane` on descriptor `fd`: `first` goes out at once,
     * then the frames released since the main thread last looked (from event
     * `fromIndex` on, still in the ring), then every frame released from now.
     */
    attach(lane: number, id: number, fd: number, fromIndex: number, first: string): void {
      const target = outlet(lane);
      const watcher: SocketWatcher = { fd, pending: [], pendingBytes: 0, progressAt: now(), ending: false };
      target.watchers.set(id, watcher);
      const text = Buffer.from(first, 'utf8');
      deliver(lane, id, watcher, [text], text.length);
      if (!target.bytes || !target.watchers.has(id)) return;
      const gap = new FloatList();
      const lateness = new FloatList();
      const { released } = target;
      for (let at = target.releasedFrom; at < released.length; at += FRAME_WIDTH + 1) {
        if (released.get(at + FRAME.index) < fromIndex) continue;
        for (let k = 0; k < FRAME_WIDTH; k++) gap.push(released.get(at + k));
        lateness.push(released.get(at + FRAME_WIDTH));
      }
      if (lateness.length === 0) return;
      const frames = packFrames(target.bytes, gap, 0, lateness.length, lateness);
      deliver(lane, id, watcher, [frames], frames.length);
    },

    /** Text for one watcher (id 0: every watcher of the lane), in order with the frames. */
    send(lane: number, id: number, text: string): void {
      const target = outlets.get(lane);
      if (!target) return;
      const bytes = Buffer.from(text, 'utf8');
      for (const [watcherId, watcher] of target.watchers)
        if (id === 0 || id === watcherId) deliver(lane, watcherId, watcher, [bytes], bytes.length);
    },

    /** Closes the watcher once what it has waiting is out. */
    end(lane: number, id: number): void {
      const watcher = outlets.get(lane)?.watchers.get(id);
      if (!watcher) return;
      watcher.ending = true;
      drainWatcher(lane, id, watcher);
    },

    /** The main thread saw the stream close: drop it. */
    detach(lane: number, id: number): void {
      const watcher = outlets.get(lane)?.watchers.get(id);
      if (watcher) close(lane, id, watcher, CLOSE_REASON.gone);
    },

    /** The lane's deadlines were cleared: its released frames are the main thread's again. */
    clear(lane: number, dropRing: boolean): void {
      const target = outlets.get(lane);
      if (!target) return;
      target.released.clear();
      target.releasedFrom = 0;
      if (dropRing) {
        target.bytes = null;
        target.header = null;
      }
      if (!target.bytes && target.watchers.size === 0) outlets.delete(lane);
    },

    /**
     * Writes frames [from, to) of `frames` released `late.get(i)` ns late to
     * the lane's watchers; true when one or more watchers were written to.
     */
    release(lane: number, frames: Floats, from: number, to: number, late: Floats): boolean {
      const target = outlets.get(lane);
      if (!target?.bytes || from === to) return false;
      if (target.header) {
        // keep what a watcher attaching now may still need: frames the main thread has not taken (in
        // index order, so taken ones are dropped from the front; compacted once they are most of it)
        const processed = Atomics.load(target.header, RING.processedIndex);
        const { released } = target;
        let at = target.releasedFrom;
        while (at < released.length && released.get(at + FRAME.index) < processed) at += FRAME_WIDTH + 1;
        if (at > 4096 * (FRAME_WIDTH + 1) && 2 * at > released.length) {
          released.dropFront(at);
          at = 0;
        }
        target.releasedFrom = at;
      }
      for (let i = from; i < to; i++) {
        if (frames.get(i * FRAME_WIDTH + FRAME.length) === 0) continue;
        for (let k = 0; k < FRAME_WIDTH; k++) target.released.push(frames.get(i * FRAME_WIDTH + k));
        target.released.push(late.get(i));
      }
      if (target.watchers.size === 0) return false;
      const packedFrames = packFrames(target.bytes, frames, from, to, late);
      if (packedFrames.length === 0) return false;
      for (const [id, watcher] of target.watchers)
        deliver(lane, id, watcher, [packedFrames], packedFrames.length);
      return true;
    },

    /** True while some watcher has bytes waiting for its socket. */
    get backlogged(): boolean {
      return backlog.size > 0;
    },

    /** Retries every watcher with bytes waiting. */
    retry(): void {
      const entries = [...backlog];
      backlog.clear();
      for (const [watcher, { lane, id }] of entries) drainWatcher(lane, id, watcher);
    },
  };
}
