/**
 * What the clock thread does between its waits, apart from the waiting
 * itself (clock-thread.ts): it takes the main thread's commands, keeps each
 * lane's deadlines, releases what is due (writing the frames to the lane's
 * sockets) and reports it. Built from the rings and its collaborators, so a
 * test can drive it on the main thread.
 */
import { LatenessLog } from '../lateness-log';
import { ReleaseStats } from '../release-stats';
import type { clockSockets } from './clock-sockets';
import {
  CONTROL,
  COMMAND,
  COMMAND_KIND,
  REPORT,
  REPORT_KIND,
  REPORT_WIDTH,
  type ClockPortMessage,
  type SlotRing,
} from './clock-wire';
import { FRAME_WIDTH, RECORD, recordSlot, ringRecords } from '../lane/lane-layout';
import { FloatList } from './float-list';

type ClockSockets = ReturnType<typeof clockSockets>;

/**
 * One lane's records (its buffer's, null until one is handed over),
 * released up to `head`, published up to `tail`, each due at `anchor` plus
 * its own due; and where its session keeps what each release was.
 */
interface LaneRecords {
  id: number;
  generation: number;
  records: Float64Array | null;
  head: number;
  tail: number;
  anchor: number;
  stats: ReleaseStats | null;
  log: LatenessLog;
  /** released and not reported yet: how many, when the last were released and written (-1: to no socket) */
  unreported: number;
  releasedAt: number;
  writtenAt: number;
}

/** A started dense replay queues thousands of commands: releasing what is due must not wait for them all. */
const DRAIN_BATCH = 256;

export interface ClockCoreParts {
  control: Int32Array;
  commands: SlotRing;
  reports: SlotRing;
  /** the lane sockets, told how to report a watcher closed */
  sockets(reportClosed: (lane: number, watcher: number, reason: number) => void): ClockSockets;
  /** the next message on the port (a command says one is there) */
  message(): ClockPortMessage;
  /** wakes the main thread (a byte on its doorbell pipe) */
  ringDoorbell(): void;
  now(): number;
}

export class ClockCore {
  private readonly lanes = new Map<number, LaneRecords>();
  /** the frames of the records being released, FRAME_WIDTH numbers each, for the sockets (reused) */
  private readonly frames = new FloatList();
  private readonly lateness = new FloatList();
  private readonly deadlines = new FloatList();
  /** reports that did not fit in the ring yet, REPORT_WIDTH numbers each */
  private readonly unsent: number[] = [];
  private readonly out: ClockSockets;

  constructor(private readonly parts: ClockCoreParts) {
    this.out = parts.sockets((lane, watcher, reason) => {
      const at = this.unsent.length;
      for (let k = 0; k < REPORT_WIDTH; k++) this.unsent.push(0);
      this.unsent[at + REPORT.kind] = REPORT_KIND.closed;
      this.unsent[at + REPORT.lane] = lane;
      this.unsent[at + REPORT.closed.watcher] = watcher;
      this.unsent[at + REPORT.closed.reason] = reason;
    });
  }

  /** True while sockets or reports wait for room: the thread looks again soon even with nothing due. */
  get backlogged(): boolean {
    return this.out.backlogged || this.unsent.length > 0 || this.parts.reports.claim() < 0;
  }

  /** The earliest deadline of any lane. */
  next(): number | undefined {
    let next: number | undefined;
    for (const lane of this.lanes.values()) {
      if (lane.head === lane.tail || !lane.records) continue;
      const deadline = lane.anchor + lane.records[recordSlot(lane.head) + RECORD.due]!;
      if (next === undefined || deadline < next) next = deadline;
    }
    return next;
  }

  /**
   * Applies up to DRAIN_BATCH queued commands: 'stop' once told to stop,
   * 'more' when commands remain.
   */
  drain(): 'stop' | 'more' | 'done' {
    const ring = this.parts.commands;
    for (let taken = 0; ; taken++) {
      const slot = ring.peek();
      if (slot < 0) return 'done';
      if (taken === DRAIN_BATCH) return 'more';
      const stop = this.apply(ring.slots, slot);
      ring.take();
      if (stop) return 'stop';
    }
  }

  /** Retries what waits: sockets that could not take their bytes, reports that did not fit or were not asked for yet. */
  retry(): void {
    if (this.out.backlogged) this.out.retry();
    this.tell(false);
  }

  /**
   * Writes what is due at `t` and adds it to the lanes' unreported counts;
   * they are reported when the main thread asks (tell), so however many
   * looks a dense replay takes, the main thread reads one report per lane
   * each time it looks. False when the report ring is full.
   */
  release(t: number): boolean {
    const releasedAt = Math.round(t);
    for (const lane of this.lanes.values()) {
      const records = lane.records;
      if (
        !records ||
        lane.head === lane.tail ||
        lane.anchor + records[recordSlot(lane.head) + RECORD.due]! > t
      )
        continue;
      const first = lane.head;
      const { frames, lateness, deadlines } = this;
      frames.clear();
      lateness.clear();
      deadlines.clear();
      for (; lane.head !== lane.tail; lane.head++) {
        const at = recordSlot(lane.head);
        const deadline = lane.anchor + records[at + RECORD.due]!;
        if (deadline > t) break;
        for (let k = 0; k < FRAME_WIDTH; k++) frames.push(records[at + k]!);
        const late = releasedAt > deadline ? releasedAt - deadline : 0;
        lateness.push(late);
        deadlines.push(deadline);
        lane.stats?.released(late);
        lane.log.set(records[at + RECORD.index]!, late);
      }
      const id = lane.id;
      const wrote = this.out.release(id, frames, 0, lateness.length, lateness);
      const writtenAt = wrote ? Math.round(this.parts.now()) : -1;
      if (wrote && lane.stats)
        for (let i = 0; i < deadlines.length; i++) {
          const deadline = deadlines.get(i);
          lane.stats.delivery.add(writtenAt > deadline ? writtenAt - deadline : 0);
        }
      lane.unreported += lane.head - first;
      lane.releasedAt = releasedAt;
      if (wrote) lane.writtenAt = writtenAt;
    }
    return this.tell(false);
  }

  /**
   * Reports every lane's unreported releases (one report each) if the main
   * thread asked for them (its doorbell is armed) or `force` (it waits in a
   * SYNC); false when the report ring is full.
   */
  tell(force: boolean): boolean {
    // the doorbell rings only for something new: an empty ring must not wake the main thread, which
    // asks again at once and would wake this thread again
    const control = this.parts.control;
    let told = this.post();
    let full = this.unsent.length > 0;
    if (!full && (force || Atomics.load(control, CONTROL.doorbell) === 1))
      ({ told, full } = this.reportLanes(told));
    // what is held is said before the doorbell is looked at again, and the main thread arms the
    // doorbell before it looks at `held` (release-reader.ts): one of the two sees the other's
    // store, so releases are never left held behind an armed doorbell with nobody to wake this thread
    const held = this.holds();
    Atomics.store(control, CONTROL.held, held ? 1 : 0);
    if (held && !full && Atomics.load(control, CONTROL.doorbell) === 1) {
      ({ told, full } = this.reportLanes(told));
      Atomics.store(control, CONTROL.held, this.holds() ? 1 : 0);
    }
    if (told) this.ring();
    return !full;
  }

  /** Every lane's unreported releases, a report each, until the ring is full. */
  private reportLanes(told: boolean): { told: boolean; full: boolean } {
    for (const lane of this.lanes.values()) {
      if (lane.unreported === 0) continue;
      if (!this.report(lane)) return { told, full: true };
      told = true;
    }
    return { told, full: false };
  }

  /** Whether releases wait here: counted while the doorbell was off, or reports the ring had no room for. */
  private holds(): boolean {
    if (this.unsent.length > 0) return true;
    for (const lane of this.lanes.values()) if (lane.unreported > 0) return true;
    return false;
  }

  /** One lane's unreported releases in one report; false when the ring is full. */
  private report(lane: LaneRecords): boolean {
    if (lane.unreported === 0) return true;
    const reports = this.parts.reports;
    const slot = reports.claim();
    if (slot < 0) return false;
    this.encodeReleased(reports.slots, slot, lane);
    reports.publish();
    return true;
  }

  /** Writes `lane`'s unreported releases as a RELEASED report into `slots` at `at`; they are reported then. */
  private encodeReleased(slots: number[] | Float64Array, at: number, lane: LaneRecords): void {
    slots[at + REPORT.kind] = REPORT_KIND.released;
    slots[at + REPORT.lane] = lane.id;
    slots[at + REPORT.generation] = lane.generation;
    slots[at + REPORT.released.count] = lane.unreported;
    slots[at + REPORT.released.releasedAt] = lane.releasedAt;
    slots[at + REPORT.released.writtenAt] = lane.writtenAt;
    lane.unreported = 0;
    lane.writtenAt = -1;
  }

  /** One command at `slot`; true when it says stop. */
  private apply(c: Float64Array, slot: number): boolean {
    const id = c[slot + COMMAND.lane]!;
    switch (c[slot + COMMAND.kind]) {
      case COMMAND_KIND.stop:
        return true;
      case COMMAND_KIND.records: {
        const lane = this.lane(id);
        lane.generation = c[slot + COMMAND.generation]!;
        lane.tail = c[slot + COMMAND.records.tail]!;
        break;
      }
      case COMMAND_KIND.anchor:
        this.lane(id).anchor = c[slot + COMMAND.anchor.at]!;
        break;
      case COMMAND_KIND.clear: {
        const forGood = c[slot + COMMAND.clear.forGood] === 1;
        // what was released before is reported (the SYNC that follows a clear waits for it)
        const lane = this.lane(id);
        this.flushLane(lane);
        // for good: the lane hands its statistics and pages again with its next buffer
        if (forGood) this.lanes.delete(id);
        else lane.tail = lane.head;
        this.out.clear(id, forGood);
        break;
      }
      case COMMAND_KIND.ring: {
        const received = this.parts.message();
        if (!('ring' in received)) break;
        const lane = this.lane(id);
        this.flushLane(lane);
        lane.generation = c[slot + COMMAND.generation]!;
        lane.records = ringRecords(received.ring);
        lane.head = lane.tail = c[slot + COMMAND.ring.head]!;
        this.out.buffer(id, received.ring);
        break;
      }
      case COMMAND_KIND.stats: {
        const received = this.parts.message();
        if ('stats' in received) this.lane(id).stats = new ReleaseStats(received.stats);
        break;
      }
      case COMMAND_KIND.log: {
        const received = this.parts.message();
        if ('log' in received) this.lane(id).log.adopt(c[slot + COMMAND.log.page]!, received.log);
        break;
      }
      case COMMAND_KIND.attach: {
        const received = this.parts.message();
        const at = COMMAND.attach;
        this.out.attach(
          id,
          c[slot + at.watcher]!,
          c[slot + at.fd]!,
          c[slot + at.fromIndex]!,
          'text' in received ? received.text : '',
        );
        break;
      }
      case COMMAND_KIND.send: {
        const received = this.parts.message();
        if ('text' in received) this.out.send(id, c[slot + COMMAND.send.watcher]!, received.text);
        break;
      }
      case COMMAND_KIND.end:
        this.out.end(id, c[slot + COMMAND.end.watcher]!);
        break;
      case COMMAND_KIND.detach:
        this.out.detach(id, c[slot + COMMAND.detach.watcher]!);
        break;
      case COMMAND_KIND.sync:
        this.tell(true);
        Atomics.store(this.parts.control, CONTROL.ack, c[slot + COMMAND.sync.seq]!);
        Atomics.notify(this.parts.control, CONTROL.ack);
        break;
    }
    return false;
  }

  /** Lane `id`, made when a command first names it. */
  private lane(id: number): LaneRecords {
    let lane = this.lanes.get(id);
    if (!lane) {
      lane = {
        id,
        generation: 0,
        records: null,
        head: 0,
        tail: 0,
        anchor: 0,
        stats: null,
        log: new LatenessLog(),
        unreported: 0,
        releasedAt: 0,
        writtenAt: -1,
      };
      this.lanes.set(id, lane);
    }
    return lane;
  }

  /** A lane's unreported releases, reported before its generation or buffer changes (into `unsent` if the ring is full). */
  private flushLane(lane: LaneRecords): void {
    this.post();
    if (lane.unreported === 0 || (this.unsent.length === 0 && this.report(lane))) return;
    const at = this.unsent.length;
    for (let k = 0; k < REPORT_WIDTH; k++) this.unsent.push(0);
    this.encodeReleased(this.unsent, at, lane);
  }

  /** Moves waiting reports into the ring as far as they fit; true if any moved. */
  private post(): boolean {
    const taken = this.parts.reports.push(this.unsent, 0);
    if (taken > 0) this.unsent.splice(0, taken);
    return taken > 0;
  }

  /** Rings the doorbell if the main thread asked for one. */
  private ring(): void {
    if (Atomics.compareExchange(this.parts.control, CONTROL.doorbell, 1, 0) === 1) this.parts.ringDoorbell();
  }
}
