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
import { clockRings } from '../../daemon/replay/clock/clock-thread';
import {
  CLOSE_REASON,
  COMMAND,
  COMMAND_WIDTH,
  CONTROL,
  CONTROL_WORDS,
  FRAME_WIDTH,
  REPORT_WIDTH,
  RING,
  decodeReport,
  encodeCommand,
  type ClockCommand,
  type ClockPortMessage,
  type ClockReport,
} from '../../daemon/replay/clock/clock-wire';
import { EarlyWake } from '../../daemon/replay/clock/early-wake';

const COMMANDS = 512;
const REPORTS = 4;

function setup() {
  const data = {
    control: new SharedArrayBuffer(4 * CONTROL_WORDS),
    commands: new SharedArrayBuffer(8 * COMMAND_WIDTH * COMMANDS),
    reports: new SharedArrayBuffer(8 * REPORT_WIDTH * REPORTS),
  };
  const rings = clockRings(data);
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
  return {
    core,
    control: rings.control,
    send,
    reports,
    written,
    messages,
    doorbells: () => doorbells,
    setNow: (ns: number) => (nowNs = ns),
  };
}

const at = (deadline: number, index = -1, offset = 0, length = 0, latenessAt = 0): ClockCommand => ({
  kind: 'at',
  deadline,
  offset,
  length,
  latenessAt,
  index,
});

describe('clock wire', () => {
  it('derives every width from the names', () => {
    expect(CONTROL_WORDS).toBe(Object.keys(CONTROL).length);
    // kind, lane, generation, then AT's deadline and a frame, the widest command
    expect(COMMAND_WIDTH).toBe(3 + 1 + FRAME_WIDTH);
    expect(COMMAND.at).toEqual({ deadline: 3, offset: 4, length: 5, latenessAt: 6, index: 7 });
    expect(REPORT_WIDTH).toBe(6);
  });

  it('encodes a command with its fields by name and zeroes the rest of the slot', () => {
    const slots = new Float64Array(COMMAND_WIDTH).fill(9);
    encodeCommand(slots, 0, 7, 3, { kind: 'attach', watcher: 2, fd: 40, fromIndex: 5 });
    expect([...slots]).toEqual([4, 7, 3, 2, 40, 5, 0, 0]);
  });
});

describe('ClockCore', () => {
  it('releases due deadlines in one report per lane with the time released, and rings once asked', () => {
    const t = setup();
    t.send(1, 0, at(100), at(200), at(300));
    t.send(2, 5, at(150));
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
    // no doorbell asked for since: none rung
    t.core.release(400);
    expect(t.doorbells()).toBe(1);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 0, count: 1, releasedAt: 400, writtenAt: -1 },
    ]);
    expect(t.core.next()).toBeUndefined();
  });

  it('writes a frame at release with its lateness spliced in, and reports when', () => {
    const t = setup();
    const ring = new SharedArrayBuffer(RING.dataOffset + 256);
    const length = Buffer.from(ring).write('late=;', RING.dataOffset);
    t.messages.push({ ring }, { text: 'hello;' });
    t.send(
      1,
      0,
      { kind: 'ring' },
      { kind: 'attach', watcher: 1, fd: 9, fromIndex: 0 },
      at(1000, 0, 0, length, 5),
    );
    t.core.drain();
    t.setNow(1500);
    t.core.release(1250);
    expect(t.written).toEqual(['hello;', 'late=250;']);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 0, count: 1, releasedAt: 1250, writtenAt: 1500 },
    ]);
  });

  it('forgets a cleared lane, and a new generation starts the lane afresh', () => {
    const t = setup();
    t.send(1, 0, at(100), at(200));
    t.send(1, 0, { kind: 'clear', forGood: 0 });
    t.send(1, 1, at(300));
    t.core.drain();
    expect(t.core.next()).toBe(300);
    t.core.release(300);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: 1, generation: 1, count: 1, releasedAt: 300, writtenAt: -1 },
    ]);
  });

  it('acknowledges a sync after every command before it, and stops when told', () => {
    const t = setup();
    t.send(0, 0, { kind: 'sync', seq: 42 }, { kind: 'stop' }, at(5));
    expect(t.core.drain()).toBe('stop');
    expect(Atomics.load(t.control, CONTROL.ack)).toBe(42);
    expect(t.core.next()).toBeUndefined();
  });

  it('takes commands in batches, so what is due is not kept waiting behind them', () => {
    const t = setup();
    t.send(1, 0, ...Array.from({ length: 300 }, (_, i) => at(i)));
    expect(t.core.drain()).toBe('more');
    expect(t.core.next()).toBe(0);
    expect(t.core.drain()).toBe('done');
  });

  it('keeps reports that do not fit until the main thread frees the ring', () => {
    const t = setup();
    for (let lane = 1; lane <= REPORTS + 1; lane++) t.send(lane, 0, at(10));
    t.core.drain();
    expect(t.core.release(10)).toBe(false);
    expect(t.reports()).toHaveLength(REPORTS);
    expect(t.core.release(20)).toBe(true);
    expect(t.reports()).toEqual([
      { kind: 'released', lane: REPORTS + 1, generation: 0, count: 1, releasedAt: 20, writtenAt: -1 },
    ]);
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
});
