/**
 * The clock thread's logic, driven on the main thread: commands encoded as
 * the main thread encodes them (clock-wire.ts) go through the real shared
 * rings to ClockCore, whose releases and reports are read back with the
 * main thread's decoder; the lane sockets are the real ones on a fake `fs`.
 * The waiting itself (clock-thread.ts's loop) is covered by the integration
 * tests of the high-resolution clock.
 */
import { ClockCore } from '../../daemon/replay/clock/clock-core';
import { clockSockets } from '../../daemon/replay/clock/clock-sockets';
import {
  CLOSE_REASON,
  COMMAND,
  COMMAND_KIND,
  COMMAND_WIDTH,
  CONTROL,
  CONTROL_WORDS,
  REPORT_WIDTH,
  clockRings,
  decodeReport,
  encodeCommand,
  type ClockCommand,
  type ClockPortMessage,
  type ClockReport,
} from '../../daemon/replay/clock/clock-wire';
import {
  FRAME_WIDTH,
  RECORD,
  RECORD_WIDTH,
  RING,
  recordSlot,
  ringRecords,
} from '../../daemon/replay/lane/lane-layout';
import { DENSE_GAP_NS, DENSE_LOOK_NS, EarlyWake } from '../../daemon/replay/clock/early-wake';
import { LatenessLog } from '../../daemon/replay/lateness-log';
import { ReleaseStats } from '../../daemon/replay/release-stats';

const COMMANDS = 512;
const REPORTS = 4;

function setup() {
  const data = {
    control: new SharedArrayBuffer(4 * CONTROL_WORDS),
    commands: new SharedArrayBuffer(8 * COMMAND_WIDTH * COMMANDS),
    reports: new SharedArrayBuffer(8 * REPORT_WIDTH * REPORTS),
  };
  const rings = clockRings(data);
  // as the main thread starts: asking for the first reports
  Atomics.store(rings.control, CONTROL.doorbell, 1);
  const written: string[] = [];
  const messages: ClockPortMessage[] = [];
  let doorbells = 0;
  let nowNs = 0;
  const fs = {
    writevSync(_fd: number, views: Uint8Array[]): number {
      const text = views.map((view) => Buffer.from(view).toString('utf8')).join('');
      written.push(text);
      return Buffer.byteLength(text);
    },
  } as unknown as typeof import('node:fs');
  const core = new ClockCore({
    ...rings,
    sockets: (reportClosed) =>
      clockSockets(fs, { softBytes: 64, hardBytes: 256, stallMs: 2000 }, () => nowNs, reportClosed),
    message: () => messages.shift()!,
    ringDoorbell: () => doorbells++,
    now: () => nowNs,
  });
  const send = (lane: number, generation: number, ...commands: ClockCommand[]) => {
    const backlog: number[] = [];
    for (const command of commands) encodeCommand(backlog, backlog.length, lane, generation, command);
    expect(rings.commands.push(backlog, 0)).toBe(backlog.length);
  };
  const reports = (): ClockReport[] => {
    const out: ClockReport[] = [];
    for (let slot = rings.reports.peek(); slot >= 0; slot = rings.reports.peek()) {
      out.push(decodeReport(rings.reports.slots, slot));
      rings.reports.take();
    }
    return out;
  };
  /** Each lane's buffer as the main thread writes it, and how many records it wrote. */
  const buffers = new Map<number, { ring: SharedArrayBuffer; tail: number }>();
  /** Hands the clock a buffer for `lane` (RING), as a lane's first deadline does. */
  const open = (lane: number, generation: number, ring = new SharedArrayBuffer(RING.dataOffset + 256)) => {
    buffers.set(lane, { ring, tail: 0 });
    messages.push({ ring });
    send(lane, generation, { kind: 'ring', head: 0 });
  };
  /** Writes records into `lane`'s buffer (no frame unless given) and publishes them with one RECORDS command. */
  const arm = (
    lane: number,
    generation: number,
    ...records: (number | Partial<Record<string, number>>)[]
  ) => {
    const buffer = buffers.get(lane)!;
    const slots = ringRecords(buffer.ring);
    for (const r of records) {
      const fields = typeof r === 'number' ? { due: r } : r;
      const at = recordSlot(buffer.tail++);
      slots.fill(0, at, at + RECORD_WIDTH);
      slots[at + RECORD.index] = -1;
      for (const [name, value] of Object.entries(fields))
        slots[at + RECORD[name as keyof typeof RECORD]] = value!;
    }
    send(lane, generation, { kind: 'records', tail: buffer.tail });
  };
  return {
    core,
    control: rings.control,
    send,
    open,
    arm,
    reports,
    written,
    messages,
    doorbells: () => doorbells,
    setNow: (ns: number) => (nowNs = ns),
  };
}

describe('clock wire', () => {
  it('derives every width from the names', () => {
    expect(CONTROL_WORDS).toBe(Object.keys(CONTROL).length);
    // kind, lane, generation, then ATTACH's watcher, fd and first index, the widest command
    expect(COMMAND_WIDTH).toBe(3 + 3);
    expect(COMMAND.records).toEqual({ tail: 3 });
    expect(REPORT_WIDTH).toBe(6);
    // a record is a frame for the sockets, then its due time (from the anchor), where its bytes end, its recorded offset and id's length
    expect(RECORD_WIDTH).toBe(FRAME_WIDTH + 4);
    expect(RECORD).toEqual({
      offset: 0,
      length: 1,
      latenessAt: 2,
      index: 3,
      due: 4,
      end: 5,
      recorded: 6,
      idLength: 7,
    });
    expect(RING.dataOffset).toBe(RING.recordsOffset + 8 * RECORD_WIDTH * RING.records);
  });

  it('encodes a command with its fields by name and zeroes the rest of the slot', () => {
    const slots = new Float64Array(COMMAND_WIDTH).fill(9);
    encodeCommand(slots, 0, 7, 3, { kind: 'attach', watcher: 2, fd: 40, fromIndex: 5 });
    expect([...slots]).toEqual([COMMAND_KIND.attach, 7, 3, 2, 40, 5]);
  });
});

describe('ClockCore', () => {
  it('releases due deadlines in one report per lane with the time released, and rings once asked', () => {
    const t = setup();
    t.open(1, 0);
    t.open(2, 5);
    t.arm(1, 0, 100, 200, 300);
    t.arm(2, 5, 150);
    expect(t.core.drain()).toBe('done');
    expect(t.core.next()).toBe(100);
    Atomics.store(t.control, CONTROL.doorbell, 1);
    expect(t.core.release(210)).toBe(true);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 0, count: 2, releasedAt: 210, writtenAt: -1 },
      { kind: 'released', lane: 2, generation: 5, count: 1, releasedAt: 210, writtenAt: -1 },
    ]);
    expect(t.doorbells()).toBe(1);
    expect(t.core.next()).toBe(300);
    // no doorbell asked for since: counted, not reported, none rung
    t.core.release(400);
    expect(t.doorbells()).toBe(1);
    expect(t.reports()).toEqual([]);
    // the main thread asks: the clock reports what it counted at its next look, and rings
    Atomics.store(t.control, CONTROL.doorbell, 1);
    t.core.retry();
    expect(t.doorbells()).toBe(2);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 0, count: 1, releasedAt: 400, writtenAt: -1 },
    ]);
    expect(t.core.next()).toBeUndefined();
  });

  it('writes a frame at release with its lateness spliced in, and reports when', () => {
    const t = setup();
    const ring = new SharedArrayBuffer(RING.dataOffset + 256);
    const length = Buffer.from(ring).write('late=;', RING.dataOffset);
    t.open(1, 0, ring);
    t.messages.push({ text: 'hello;' });
    t.send(1, 0, { kind: 'attach', watcher: 1, fd: 9, fromIndex: 0 });
    t.arm(1, 0, { due: 1000, index: 0, offset: 0, length, latenessAt: 5 });
    t.core.drain();
    t.setNow(1500);
    t.core.release(1250);
    expect(t.written).toEqual(['hello;', 'late=250;']);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 0, count: 1, releasedAt: 1250, writtenAt: 1500 },
    ]);
  });

  it('releases nothing of a cleared lane until records are published again, then what it held, under the new generation', () => {
    const t = setup();
    t.open(1, 0);
    t.arm(1, 0, 100, 200);
    t.send(1, 0, { kind: 'clear', forGood: 0 });
    t.core.drain();
    expect(t.core.next()).toBeUndefined();
    t.arm(1, 1, 300);
    t.core.drain();
    expect(t.core.next()).toBe(100);
    t.core.release(300);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 1, count: 3, releasedAt: 300, writtenAt: -1 },
    ]);
  });

  it('forgets a lane cleared for good', () => {
    const t = setup();
    t.open(1, 0);
    t.arm(1, 0, 100);
    t.send(1, 0, { kind: 'clear', forGood: 1 });
    t.core.drain();
    expect(t.core.next()).toBeUndefined();
    expect(t.core.release(1000)).toBe(true);
    expect(t.reports()).toEqual([]);
  });

  it("releases at the lane's anchor plus each record's due, and keeps the session's statistics and lateness itself", () => {
    const t = setup();
    const stats = new ReleaseStats();
    const page = new LatenessLog().ensure(0)[0]!;
    t.messages.push({ stats: stats.shared });
    t.send(1, 0, { kind: 'stats' });
    t.messages.push({ log: page.shared });
    t.send(1, 0, { kind: 'log', page: 0 });
    t.open(1, 0);
    t.send(1, 0, { kind: 'anchor', at: 5000 });
    t.arm(1, 0, { due: 100, index: 0 }, { due: 200, index: 1 });
    t.core.drain();
    expect(t.core.next()).toBe(5100);
    t.core.release(5250);
    expect(stats.lateness.summary()).toEqual({ p50: 50n, p99: 150n, max: 150n });
    const log = new LatenessLog();
    log.adopt(0, page.shared);
    expect([log.get(0), log.get(1), log.get(2)]).toEqual([150n, 50n, null]);
    // a new anchor (a play after a pause) moves what is left
    t.arm(1, 0, { due: 300, index: 2 });
    t.send(1, 0, { kind: 'anchor', at: 9000 });
    t.core.drain();
    expect(t.core.next()).toBe(9300);
  });

  it('rings the doorbell only for new reports, however often it looks', () => {
    const t = setup();
    t.open(1, 0);
    t.arm(1, 0, 100);
    t.core.drain();
    for (let look = 0; look < 5; look++) t.core.retry();
    expect(t.doorbells()).toBe(0);
    t.core.release(100);
    expect(t.doorbells()).toBe(1);
    expect(t.reports()).toHaveLength(1);
    // the main thread asks again and the clock looks on with nothing new: no ring
    Atomics.store(t.control, CONTROL.doorbell, 1);
    for (let look = 0; look < 5; look++) t.core.retry();
    expect(t.doorbells()).toBe(1);
  });

  it('says whether it holds releases, so that the main thread wakes it only to report them', () => {
    const t = setup();
    t.open(1, 0);
    t.arm(1, 0, 100, 200);
    t.core.drain();
    t.core.release(100);
    expect(t.reports()).toHaveLength(1);
    expect(Atomics.load(t.control, CONTROL.held)).toBe(0);
    // the main thread has not asked again: the next release is counted and held, no doorbell
    t.core.release(200);
    expect(t.doorbells()).toBe(1);
    expect(Atomics.load(t.control, CONTROL.held)).toBe(1);
    // it asks again and, seeing `held`, wakes the clock, which reports at its next look
    Atomics.store(t.control, CONTROL.doorbell, 1);
    t.core.retry();
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 0, count: 1, releasedAt: 200, writtenAt: -1 },
    ]);
    expect(t.doorbells()).toBe(2);
    expect(Atomics.load(t.control, CONTROL.held)).toBe(0);
  });

  it('acknowledges a sync after every command before it, and stops when told', () => {
    const t = setup();
    t.open(1, 0);
    t.send(0, 0, { kind: 'sync', seq: 42 }, { kind: 'stop' });
    t.arm(1, 0, 5);
    expect(t.core.drain()).toBe('stop');
    expect(Atomics.load(t.control, CONTROL.ack)).toBe(42);
    expect(t.core.next()).toBeUndefined();
  });

  it('takes commands in batches, so what is due is not kept waiting behind them', () => {
    const t = setup();
    t.open(1, 0);
    for (let i = 0; i < 300; i++) t.arm(1, 0, i);
    expect(t.core.drain()).toBe('more');
    expect(t.core.next()).toBe(0);
    expect(t.core.drain()).toBe('done');
  });

  it('keeps reports that do not fit until the main thread frees the ring', () => {
    const t = setup();
    for (let lane = 1; lane <= REPORTS + 1; lane++) {
      t.open(lane, 0);
      t.arm(lane, 0, 10);
    }
    t.core.drain();
    expect(t.core.release(10)).toBe(false);
    // held: the main thread wakes the clock once it has freed the ring
    expect(Atomics.load(t.control, CONTROL.held)).toBe(1);
    expect(t.reports()).toHaveLength(REPORTS);
    // the main thread read the full ring (the clock rang for it) and asks again
    expect(t.doorbells()).toBe(1);
    Atomics.store(t.control, CONTROL.doorbell, 1);
    expect(t.core.release(20)).toBe(true);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: REPORTS + 1, generation: 0, count: 1, releasedAt: 10, writtenAt: -1 },
    ]);
    expect(Atomics.load(t.control, CONTROL.held)).toBe(0);
  });

  it('releases thousands of records due at one look in one report, with each lateness exact', () => {
    const t = setup();
    const ring = new SharedArrayBuffer(RING.dataOffset + (1 << 20));
    const bytes = Buffer.from(ring);
    t.open(1, 0, ring);
    t.messages.push({ text: '' });
    t.send(1, 0, { kind: 'attach', watcher: 1, fd: 9, fromIndex: 0 });
    const records = Array.from({ length: 10_000 }, (_, i) => {
      const offset = 16 * i;
      bytes.write(`${i}:;`, RING.dataOffset + offset);
      return { due: 1000 + i, index: i, offset, length: `${i}:;`.length, latenessAt: `${i}:`.length };
    });
    t.arm(1, 0, ...records);
    t.core.drain();
    t.setNow(20_000);
    t.core.release(15_000);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 0, count: 10_000, releasedAt: 15_000, writtenAt: 20_000 },
    ]);
    expect(t.written.join('')).toBe(records.map((_, i) => `${i}:${15_000 - 1000 - i};`).join(''));
  });

  it('writes a lateness of any number of digits, and a frame on time as 0', () => {
    const t = setup();
    const ring = new SharedArrayBuffer(RING.dataOffset + 256);
    Buffer.from(ring).write('[];', RING.dataOffset);
    t.open(1, 0, ring);
    t.messages.push({ text: '' });
    t.send(1, 0, { kind: 'attach', watcher: 1, fd: 9, fromIndex: 0 });
    const top = Number.MAX_SAFE_INTEGER;
    const frame = { offset: 0, length: 3, latenessAt: 1 };
    t.arm(1, 0, { ...frame, due: 0, index: 0 }, { ...frame, due: top - 10, index: 1 });
    t.arm(1, 0, { ...frame, due: top, index: 2 });
    t.core.drain();
    t.core.release(top);
    expect(t.written.join('')).toBe(`[${top}];[10];[0];`);
  });

  it("walks a lane's records across the end of its ring", () => {
    const t = setup();
    t.open(1, 0);
    const first = RING.records - 2;
    for (let armed = 0; armed < first; armed += 10_000)
      t.arm(1, 0, ...Array.from({ length: Math.min(10_000, first - armed) }, () => 0));
    t.core.drain();
    t.core.release(0);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 0, count: first, releasedAt: 0, writtenAt: -1 },
    ]);
    // records first.. wrap to the ring's first slots
    t.arm(1, 0, 10, 20, 30, 40);
    t.core.drain();
    expect(t.core.next()).toBe(10);
    Atomics.store(t.control, CONTROL.doorbell, 1);
    t.core.release(30);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 0, count: 3, releasedAt: 30, writtenAt: -1 },
    ]);
    expect(t.core.next()).toBe(40);
  });

  it('reports a watcher it closed, after the reports before it', () => {
    const t = setup();
    t.messages.push({ text: 'bye' });
    t.send(3, 0, { kind: 'attach', watcher: 4, fd: 9, fromIndex: 0 }, { kind: 'end', watcher: 4 });
    t.core.drain();
    expect(t.core.backlogged).toBe(true);
    t.core.retry();
    expect(t.reports()).toEqual([
      { kind: 'closed', lane: 3, generation: 0, watcher: 4, reason: CLOSE_REASON.ended },
    ]);
    expect(t.core.backlogged).toBe(false);
  });
});

describe('EarlyWake', () => {
  const bounds = { earlyWakeNs: 250_000, minEarlyWakeNs: 30_000, maxEarlyWakeNs: 2_000_000 };

  it('starts at its margin, follows a late wake-up at once, and stays within its bounds', () => {
    const wake = new EarlyWake(bounds);
    expect(wake.margin).toBe(250_000);
    wake.woke(100_000);
    expect(wake.margin).toBe(150_000);
    wake.woke(10_000_000);
    expect(wake.margin).toBe(2_000_000);
  });

  it('comes down slowly from a late wake-up, to its floor', () => {
    const wake = new EarlyWake(bounds);
    wake.woke(100_000);
    wake.woke(0);
    expect(wake.margin).toBeCloseTo(1.5 * (100_000 - 100_000 / 32));
    for (let i = 0; i < 2000; i++) wake.fade();
    expect(wake.margin).toBe(30_000);
  });

  it('spins the margin before a deadline far from the last release, and sleeps to one close behind it', () => {
    const wake = new EarlyWake(bounds);
    // an isolated deadline: woken a margin early, then spun to it
    expect(wake.wakeAt(10_000_000, -Infinity)).toBe(10_000_000 - 250_000);
    expect(wake.wakeAt(10_000_000, 10_000_000 - DENSE_GAP_NS)).toBe(10_000_000 - 250_000);
    // a dense stretch: the thread sleeps to the deadline itself, never spinning through it ...
    expect(wake.wakeAt(10_000_000, 10_000_000 - DENSE_GAP_NS + 1)).toBe(10_000_000);
    // ... and deadlines 10 µs apart go out together, a look per DENSE_LOOK_NS
    expect(wake.wakeAt(10_000_000, 9_990_000)).toBe(9_990_000 + DENSE_LOOK_NS);
  });
});
