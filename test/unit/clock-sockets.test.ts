/**
 * The clock thread's stream writer (clock-sockets.ts), driven directly with a
 * fake `fs` whose sockets take only as many bytes as told: frames with their
 * lateness spliced in, a late attach catching up from the ring, bytes kept
 * when a socket is full and sent when it drains, the cut past the limits, an
 * end only after everything is out, and a peer gone.
 */
import { clockSockets } from '../../daemon/replay/clock/clock-sockets';
import type { Floats } from '../../daemon/replay/clock/float-list';
import { CLOSE_REASON } from '../../daemon/replay/clock/clock-wire';
import { RING } from '../../daemon/replay/lane/lane-layout';
import type { SendBufferLimits } from '../../daemon/replay/send-buffer';

class FakeSocket {
  received = '';
  /** bytes it takes before it is full (Infinity: all) */
  room = Infinity;
  gone = false;
}

function fakeFs(sockets: Map<number, FakeSocket>) {
  return {
    writevSync(fd: number, views: Uint8Array[]): number {
      const socket = sockets.get(fd)!;
      if (socket.gone) throw Object.assign(new Error('EPIPE'), { code: 'EPIPE' });
      if (socket.room === 0) throw Object.assign(new Error('EAGAIN'), { code: 'EAGAIN' });
      let taken = 0;
      for (const view of views) {
        const n = Math.min(view.length, socket.room - taken);
        socket.received += Buffer.from(view.subarray(0, n)).toString('utf8');
        taken += n;
        if (n < view.length) break;
      }
      socket.room -= taken;
      return taken;
    },
  } as unknown as typeof import('node:fs');
}

const LIMITS: SendBufferLimits = { softBytes: 64, hardBytes: 256, stallMs: 2000 } as const;

function setup() {
  const sockets = new Map<number, FakeSocket>();
  const closed: [number, number, number][] = [];
  let nowNs = 0;
  const out = clockSockets(
    fakeFs(sockets),
    LIMITS,
    () => nowNs,
    (lane, id, reason) => closed.push([lane, id, reason]),
  );
  const ring = new SharedArrayBuffer(RING.dataOffset + 4096);
  const bytes = Buffer.from(ring);
  let written = 0;
  const frames: number[] = [];
  /** Puts `head` + `tail` in the ring as frame `index`; its lateness goes between them. */
  const frame = (index: number, head: string, tail: string) => {
    const length = bytes.write(head + tail, RING.dataOffset + written);
    frames.push(written, length, Buffer.byteLength(head), index);
    written += length;
  };
  const socket = (fd: number) => {
    const s = new FakeSocket();
    sockets.set(fd, s);
    return s;
  };
  return { out, ring, frame, frames, socket, closed, advance: (ns: number) => (nowNs += ns) };
}

/** The frames and lateness the clock hands over, from a test's plain values. */
const list = (values: number[]): Floats => ({ length: values.length, get: (i) => values[i]! });
const fn = (get: (i: number) => number): Floats => ({ length: Number.MAX_SAFE_INTEGER, get });

describe('the clock thread writing replay frames to stream sockets', () => {
  it('writes each released frame with its lateness, after the first text, to every watcher', () => {
    const t = setup();
    const a = t.socket(10);
    const b = t.socket(11);
    t.out.buffer(1, t.ring);
    t.out.attach(1, 1, 10, 0, 'state-a\n');
    t.out.attach(1, 2, 11, 0, 'state-b\n');
    t.frame(0, 'e0 late=', ';\n');
    t.frame(1, 'e1 late=', ';\n');
    expect(
      t.out.release(
        1,
        list(t.frames),
        0,
        2,
        fn((i) => [5, 1234][i]!),
      ),
    ).toBe(true);
    expect(a.received).toBe('state-a\ne0 late=5;\ne1 late=1234;\n');
    expect(b.received).toBe('state-b\ne0 late=5;\ne1 late=1234;\n');
    t.out.send(1, 2, 'only-b\n');
    t.out.send(1, 0, 'both\n');
    expect(a.received.endsWith('1234;\nboth\n')).toBe(true);
    expect(b.received.endsWith('1234;\nonly-b\nboth\n')).toBe(true);
  });

  it('catches a watcher attaching late up from the frames released but not yet taken by the main thread', () => {
    const t = setup();
    t.out.buffer(1, t.ring);
    for (let i = 0; i < 4; i++) t.frame(i, `e${i}:`, '\n');
    t.out.release(
      1,
      list(t.frames),
      0,
      4,
      fn((i) => i * 10),
    );
    // the main thread has taken the releases of events 0 and 1: the watcher starts at 2
    Atomics.store(new Int32Array(t.ring, 0, RING.headerWords), RING.processedIndex, 2);
    const late = t.socket(20);
    t.out.attach(1, 7, 20, 2, 'state\n');
    expect(late.received).toBe('state\ne2:20\ne3:30\n');
    t.frame(4, 'e4:', '\n');
    t.out.release(
      1,
      list(t.frames),
      4,
      5,
      fn(() => 0),
    );
    expect(late.received).toBe('state\ne2:20\ne3:30\ne4:0\n');
  });

  it('keeps what a full socket did not take, in order, and sends it once the socket drains', () => {
    const t = setup();
    const slow = t.socket(30);
    t.out.buffer(1, t.ring);
    t.out.attach(1, 1, 30, 0, '');
    slow.room = 5;
    t.frame(0, 'abcdefgh', '|');
    t.out.release(
      1,
      list(t.frames),
      0,
      1,
      fn(() => 7),
    );
    expect(slow.received).toBe('abcde');
    expect(t.out.backlogged).toBe(true);
    t.out.send(1, 1, 'after\n');
    slow.room = Infinity;
    t.out.retry();
    expect(slow.received).toBe('abcdefgh7|after\n');
    expect(t.out.backlogged).toBe(false);
  });

  it('cuts a watcher past the hard limit at once, and past the soft one after stallMs without progress', () => {
    const t = setup();
    const stuck = t.socket(40);
    const stalled = t.socket(41);
    t.out.buffer(1, t.ring);
    t.out.attach(1, 1, 40, 0, '');
    t.out.attach(1, 2, 41, 0, '');
    stuck.room = 0;
    stalled.room = 0;
    t.out.send(1, 1, 'x'.repeat(LIMITS.hardBytes + 1));
    expect(t.closed).toEqual([[1, 1, CLOSE_REASON.cut]]);
    t.out.send(1, 2, 'y'.repeat(LIMITS.softBytes + 1));
    t.out.retry();
    expect(t.closed).toHaveLength(1);
    t.advance(LIMITS.stallMs * 1e6 + 1);
    t.out.retry();
    expect(t.closed).toEqual([
      [1, 1, CLOSE_REASON.cut],
      [1, 2, CLOSE_REASON.cut],
    ]);
    // a cut watcher gets nothing more
    t.frame(0, 'e0:', '\n');
    expect(
      t.out.release(
        1,
        list(t.frames),
        0,
        1,
        fn(() => 0),
      ),
    ).toBe(false);
  });

  it('ends a watcher only once its waiting bytes are out, and drops one whose peer is gone', () => {
    const t = setup();
    const ending = t.socket(50);
    const gone = t.socket(51);
    t.out.buffer(1, t.ring);
    t.out.attach(1, 1, 50, 0, '');
    t.out.attach(1, 2, 51, 0, '');
    ending.room = 2;
    t.out.send(1, 1, 'last words\n');
    t.out.end(1, 1);
    expect(t.closed).toEqual([]);
    ending.room = Infinity;
    t.out.retry();
    expect(ending.received).toBe('last words\n');
    expect(t.closed).toEqual([[1, 1, CLOSE_REASON.ended]]);
    gone.gone = true;
    t.out.send(1, 2, 'hello?\n');
    expect(t.closed).toEqual([
      [1, 1, CLOSE_REASON.ended],
      [1, 2, CLOSE_REASON.gone],
    ]);
  });

  it('skips deadlines that carry no frame, and forgets released frames when the lane is cleared', () => {
    const t = setup();
    const s = t.socket(60);
    t.out.buffer(1, t.ring);
    t.out.attach(1, 1, 60, 0, '');
    t.frames.push(0, 0, 0, 0); // a deadline without a frame
    t.frame(1, 'e1:', '\n');
    t.out.release(
      1,
      list(t.frames),
      0,
      2,
      fn(() => 3),
    );
    expect(s.received).toBe('e1:3\n');
    t.out.clear(1, false);
    const late = t.socket(61);
    t.out.attach(1, 2, 61, 0, 'state\n');
    expect(late.received).toBe('state\n');
  });
});
