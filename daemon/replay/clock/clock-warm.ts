/**
 * The clock thread's release path, run once before the thread says it is
 * ready (issue 48). V8 compiles a function when it is first called, so a
 * fresh daemon's first play compiled ClockCore's release, the sockets'
 * packing and writing and the release statistics while its first event was
 * due: that event's write came 0.7–1.6 ms further past its deadline than
 * the play's others' (8 fresh daemons; 0.05–0.36 ms with this). Here the thread plays a lane of its own
 * over scratch rings, through the same commands a session's lane sends: a
 * buffer, statistics, a lateness page, an anchor, a watcher on `fd` (the
 * daemon opens /dev/null), a few frames released one look at a time, a
 * text, then the lane cleared for good. The methods and closures are the
 * ones every lane runs, so their compiled code is ready for the first play.
 */
import { LatenessLog } from '../lateness-log';
import { ReleaseStats } from '../release-stats';
import { laneBuffer, ringRecords, RING, writeRecord } from '../lane/lane-layout';
import { ClockCore, type ClockCoreParts } from './clock-core';
import {
  clockRings,
  COMMAND_WIDTH,
  CONTROL,
  CONTROL_WORDS,
  encodeCommand,
  REPORT_WIDTH,
  type ClockCommand,
  type ClockPortMessage,
} from './clock-wire';

/** Frames released, one look each: the first call compiles, the next ones fill in the type feedback. */
export const WARM_RELEASES = 4;
/** How far apart the frames are due (ns), and how late each look comes: lateness gets digits to write. */
const GAP_NS = 1_000_000;
const LATE_NS = 1_234;
/** Ring slots of the scratch rings: every command and report of the warm-up fits. */
const SLOTS = 32;
const LANE = 1;
const WATCHER = 1;
/** The frame of each release, its lateness spliced in after LATENESS_KEY, as the read-ahead writes them. */
const LATENESS_KEY = '{"emitted_late_ns":';

function frameText(index: number): string {
  return `id: ${index}\nevent: replay\ndata: ${LATENESS_KEY}}\n\n`;
}

/**
 * Plays the warm-up lane on a ClockCore of its own, writing to `fd` a first
 * text, the frames with their lateness and a closing text; returns each
 * frame's lateness (ns) as the clock logged it.
 */
export function warmRelease(parts: Pick<ClockCoreParts, 'sockets' | 'now'>, fd: number): number[] {
  const rings = clockRings({
    control: new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT * CONTROL_WORDS),
    commands: new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT * COMMAND_WIDTH * SLOTS),
    reports: new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT * REPORT_WIDTH * SLOTS),
  });
  // reports are asked for, as the main thread asks, so the reporting runs too (nobody reads them)
  Atomics.store(rings.control, CONTROL.doorbell, 1);
  const messages: ClockPortMessage[] = [];
  const core = new ClockCore({
    ...rings,
    ...parts,
    message: () => messages.shift()!,
    ringDoorbell: () => Atomics.store(rings.control, CONTROL.doorbell, 1),
  });
  const backlog: number[] = [];
  const send = (command: ClockCommand, message?: ClockPortMessage) => {
    if (message) messages.push(message);
    backlog.length = 0;
    encodeCommand(backlog, 0, LANE, 0, command);
    rings.commands.push(backlog, 0);
    core.drain();
  };

  const ring = laneBuffer(4096);
  const bytes = Buffer.from(ring, RING.dataOffset);
  const records = ringRecords(ring);
  let end = 0;
  for (let i = 0; i < WARM_RELEASES; i++) {
    const text = frameText(i);
    const offset = end;
    end += bytes.write(text, offset, 'latin1');
    writeRecord(records, i, {
      offset,
      length: text.length,
      latenessAt: text.indexOf(LATENESS_KEY) + LATENESS_KEY.length,
      index: i,
      due: i * GAP_NS,
      end,
      recorded: i,
      idLength: 0,
    });
  }
  const stats = new ReleaseStats();
  const log = new LatenessLog();
  send({ kind: 'ring', head: 0 }, { ring });
  send({ kind: 'stats' }, { stats: stats.shared });
  for (const { page, shared } of log.ensure(WARM_RELEASES - 1)) send({ kind: 'log', page }, { log: shared });
  const anchor = Math.round(parts.now());
  send({ kind: 'anchor', at: anchor });
  send({ kind: 'attach', watcher: WATCHER, fd, fromIndex: 0 }, { text: ': warm\n\n' });
  send({ kind: 'records', tail: WARM_RELEASES });
  for (let i = 0; i < WARM_RELEASES; i++) {
    // a look just after each record's deadline releases it alone
    core.next();
    core.release(anchor + i * GAP_NS + (i + 1) * LATE_NS);
    while (rings.reports.peek() >= 0) rings.reports.take();
  }
  send({ kind: 'send', watcher: WATCHER }, { text: ': done\n\n' });
  send({ kind: 'detach', watcher: WATCHER });
  send({ kind: 'clear', forGood: 1 });
  return Array.from(log.slice(0, WARM_RELEASES));
}
