/**
 * The shared memory between the main thread and the replay clock thread,
 * owned here and imported by both sides: the control words, the command
 * ring (main → clock) and the report ring (clock → main); a lane's buffer
 * (its records and frames) is laid out in lane/lane-layout.ts. Every index is named, and
 * every width is derived from the names, so a field added to a command
 * widens the ring by itself.
 *
 * Slots hold Float64s: exact integers up to 2^53 (ns since the clock's
 * epoch, 104 days), with no allocation on the clock thread's side.
 */

import { indexOf } from '../slot-index';

/** Int32 words of the control buffer. */
const CONTROL_NAMES = [
  /** bumped by the main thread after queueing commands; the clock thread waits on it */
  'wake',
  'commandHead',
  'commandTail',
  'releaseHead',
  'releaseTail',
  /** 1 while the main thread wants a doorbell for the next report */
  'doorbell',
  /** 1 while the clock holds releases it has not reported (counted with the doorbell off, or no room in the ring) */
  'held',
  /** the sequence number of the last SYNC command done */
  'ack',
] as const;
export const CONTROL = indexOf(CONTROL_NAMES);
export const CONTROL_WORDS = CONTROL_NAMES.length;

/** Every command starts with these; its kind's fields follow. */
const COMMAND_HEAD = ['kind', 'lane', 'generation'] as const;

/**
 * What each command carries after its head:
 * RECORDS the lane's records up to `tail` (counted since its buffer was
 * made) may be released; ANCHOR its records are due at `at` (ns since the
 * epoch) plus their `due`; CLEAR releases nothing more until the next
 * RECORDS (the records stay; forGood 1: the lane is forgotten, buffer, statistics and pages); STATS the
 * session's ReleaseStats buffer is on the port; LOG page `page` of its
 * LatenessLog is on the port; STOP ends the thread;
 * RING the lane's buffer is on the port (released up to record `head`); ATTACH a watcher on a copy of a
 * socket, sent the frames from event `fromIndex` on (its first text is on
 * the port); SEND text for a watcher (0: all of the lane's; the text is on
 * the port); END and DETACH a watcher; SYNC stores `seq` in CONTROL.ack once
 * every command before it is done.
 */
const COMMAND_FIELDS = {
  records: ['tail'],
  anchor: ['at'],
  clear: ['forGood'],
  stats: [],
  log: ['page'],
  stop: [],
  ring: ['head'],
  attach: ['watcher', 'fd', 'fromIndex'],
  send: ['watcher'],
  end: ['watcher'],
  detach: ['watcher'],
  sync: ['seq'],
} as const satisfies Record<string, readonly string[]>;

export type CommandKind = keyof typeof COMMAND_FIELDS;
export const COMMAND_KIND = kindsOf(COMMAND_FIELDS);
/** Each kind's fields by name: their index in a command's slot. */
export const COMMAND = fieldsOf(COMMAND_HEAD, COMMAND_FIELDS);
export const COMMAND_WIDTH = widthOf(COMMAND_HEAD, COMMAND_FIELDS);

/** A command as the main thread queues it: its lane and generation are the lane's. */
export type ClockCommand = {
  [K in CommandKind]: { kind: K } & Record<(typeof COMMAND_FIELDS)[K][number], number>;
}[CommandKind];

/** Every report starts with these. */
const REPORT_HEAD = ['kind', 'lane', 'generation'] as const;
/**
 * RELEASED: the lane's next `count` deadlines were released at `releasedAt`
 * and their frames written at `writtenAt` (-1: to no socket). CLOSED: the
 * clock closed its copy of a watcher's socket, for CLOSE_REASONS[reason].
 */
const REPORT_FIELDS = {
  released: ['count', 'releasedAt', 'writtenAt'],
  closed: ['watcher', 'reason'],
} as const satisfies Record<string, readonly string[]>;

export type ReportKind = keyof typeof REPORT_FIELDS;
export const REPORT_KIND = kindsOf(REPORT_FIELDS);
export const REPORT = fieldsOf(REPORT_HEAD, REPORT_FIELDS);
export const REPORT_WIDTH = widthOf(REPORT_HEAD, REPORT_FIELDS);

/** A report as the main thread reads it. */
export type ClockReport = {
  [K in ReportKind]: { kind: K; lane: number; generation: number } & Record<
    (typeof REPORT_FIELDS)[K][number],
    number
  >;
}[ReportKind];

/** A message on the clock's port, read when a command says one is there: a lane's ring, its session's statistics or lateness page, or text for its watchers. */
export type ClockPortMessage =
  { ring: SharedArrayBuffer } | { stats: SharedArrayBuffer } | { log: SharedArrayBuffer } | { text: string };

/** Why the clock thread closed its copy of a watcher's socket; reported by index. */
export const CLOSE_REASONS = ['ended', 'cut', 'gone'] as const;
export type SocketClosed = (typeof CLOSE_REASONS)[number];
export const CLOSE_REASON = indexOf(CLOSE_REASONS);

/** Writes `command` of lane `lane` into `slots` from `at` (a ring slot, or the end of a backlog). */
export function encodeCommand(
  slots: number[] | Float64Array,
  at: number,
  lane: number,
  generation: number,
  command: ClockCommand,
): void {
  const fields = COMMAND[command.kind] as Record<string, number>;
  slots[at + COMMAND.kind] = COMMAND_KIND[command.kind];
  slots[at + COMMAND.lane] = lane;
  slots[at + COMMAND.generation] = generation;
  for (let k = COMMAND_HEAD.length; k < COMMAND_WIDTH; k++) slots[at + k] = 0;
  for (const [name, index] of Object.entries(fields))
    slots[at + index] = (command as Record<string, number>)[name]!;
}

const REPORT_KINDS = Object.keys(REPORT_FIELDS) as ReportKind[];

/** The report in `slots` from `at`. */
export function decodeReport(slots: Float64Array, at: number): ClockReport {
  const kind = REPORT_KINDS[slots[at + REPORT.kind]!];
  if (!kind) throw new Error(`replay clock: report of unknown kind ${slots[at + REPORT.kind]}`);
  const report: Record<string, number | string> = {
    kind,
    lane: slots[at + REPORT.lane]!,
    generation: slots[at + REPORT.generation]!,
  };
  for (const [name, index] of Object.entries(REPORT[kind])) report[name] = slots[at + index]!;
  return report as ClockReport;
}

/**
 * A single-producer single-consumer ring of fixed-width slots over shared
 * memory, its head and tail in two control words: what both threads use
 * for commands and reports. The producer writes slots then publishes the
 * tail; the consumer reads slots then publishes the head.
 */
export class SlotRing {
  readonly capacity: number;

  constructor(
    private readonly control: Int32Array,
    private readonly headWord: number,
    private readonly tailWord: number,
    readonly slots: Float64Array,
    readonly width: number,
  ) {
    this.capacity = slots.length / width;
    if (!Number.isInteger(this.capacity) || (this.capacity & (this.capacity - 1)) !== 0)
      throw new Error(`slot ring: ${this.capacity} slots is not a power of two`);
  }

  /**
   * Producer: copies whole slots from `source` (from `from`, `width` numbers
   * each) as far as they fit and publishes them; returns where it stopped.
   */
  push(source: ArrayLike<number>, from: number): number {
    const head = Atomics.load(this.control, this.headWord);
    let tail = this.control[this.tailWord]!;
    let taken = from;
    while (taken < source.length && ((tail - head) | 0) < this.capacity) {
      const slot = (tail & (this.capacity - 1)) * this.width;
      for (let k = 0; k < this.width; k++) this.slots[slot + k] = source[taken + k]!;
      taken += this.width;
      tail = (tail + 1) | 0;
    }
    if (taken > from) Atomics.store(this.control, this.tailWord, tail);
    return taken;
  }

  /** Producer: the index in `slots` of the next free slot, or -1 when the ring is full; publish() makes it readable. */
  claim(): number {
    const head = Atomics.load(this.control, this.headWord);
    const tail = this.control[this.tailWord]!;
    return ((tail - head) | 0) >= this.capacity ? -1 : (tail & (this.capacity - 1)) * this.width;
  }

  /** Producer: makes the slot claim() gave readable. */
  publish(): void {
    Atomics.store(this.control, this.tailWord, (this.control[this.tailWord]! + 1) | 0);
  }

  /**
   * Consumer: the index in `slots` of the next readable slot, or -1 when
   * there is none; the slot is the consumer's until take() frees it.
   */
  peek(): number {
    const head = this.control[this.headWord]!;
    return head === Atomics.load(this.control, this.tailWord)
      ? -1
      : (head & (this.capacity - 1)) * this.width;
  }

  /** Consumer: frees the slot peek() gave. */
  take(): void {
    Atomics.store(this.control, this.headWord, (this.control[this.headWord]! + 1) | 0);
  }

  /** True when nothing is waiting to be read. */
  get empty(): boolean {
    return this.control[this.headWord] === Atomics.load(this.control, this.tailWord);
  }
}

function kindsOf<const K extends string>(fields: Record<K, readonly string[]>): Record<K, number> {
  return indexOf(Object.keys(fields) as K[]);
}

type FieldIndex<H extends readonly string[], F extends Record<string, readonly string[]>> = Record<
  H[number],
  number
> & { [K in keyof F]: Record<F[K][number], number> };

function fieldsOf<const H extends readonly string[], const F extends Record<string, readonly string[]>>(
  head: H,
  fields: F,
): FieldIndex<H, F> {
  const named: Record<string, unknown> = { ...indexOf(head) };
  for (const [kind, names] of Object.entries(fields))
    named[kind] = Object.fromEntries(names.map((name, i) => [name, head.length + i]));
  return named as FieldIndex<H, F>;
}

function widthOf(head: readonly string[], fields: Record<string, readonly string[]>): number {
  return head.length + Math.max(...Object.values(fields).map((names) => names.length));
}

/** The command and report rings over the thread's shared buffers, as either side sees them. */
export function clockRings(data: {
  control: SharedArrayBuffer;
  commands: SharedArrayBuffer;
  reports: SharedArrayBuffer;
}): {
  control: Int32Array;
  commands: SlotRing;
  reports: SlotRing;
} {
  const control = new Int32Array(data.control);
  return {
    control,
    commands: new SlotRing(
      control,
      CONTROL.commandHead,
      CONTROL.commandTail,
      new Float64Array(data.commands),
      COMMAND_WIDTH,
    ),
    reports: new SlotRing(
      control,
      CONTROL.releaseHead,
      CONTROL.releaseTail,
      new Float64Array(data.reports),
      REPORT_WIDTH,
    ),
  };
}
