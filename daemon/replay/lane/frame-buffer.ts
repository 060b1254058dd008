/**
 * A session's frames read ahead, in a lane buffer's shared memory (layout:
 * clock-wire.ts): the main thread's bookkeeping of it. Writers (frame-writer.ts,
 * on a query worker) add records at `tail`; the clock releases them in
 * order; the main thread takes the releases (`take`), which frees their
 * room for the next writes. Nothing here runs per event but `frameText`,
 * for the few streams the main thread writes itself.
 */
import { RECORD, RING, recordSlot, ringRecords } from './lane-layout';
import type { LateFrame } from './replay-frame';
import type { FrameDest, FramesWritten } from './frame-writer';

export class FrameBuffer {
  readonly records: Float64Array;
  private readonly bytes: Buffer;
  /** the buffer's header words, shared with the clock thread */
  private readonly header: Int32Array;
  /** records written, and bytes, since the buffer was made */
  tail = 0;
  written = 0;
  /** records whose release the main thread has taken, and the bytes that frees */
  taken = 0;
  freed = 0;
  /** wall offset of the last record written (-1: none) */
  lastDue = -1;
  /** the last write stopped for want of room */
  full = false;
  /** a writer is writing into it now: it must not be handed to another session meanwhile */
  writing = false;

  constructor(readonly ring: SharedArrayBuffer) {
    this.records = ringRecords(ring);
    this.bytes = Buffer.from(ring);
    this.header = new Int32Array(ring, 0, RING.headerWords);
  }

  /** Tells the clock's sockets that the main thread has taken the releases of every event before `index`. */
  processedUpTo(index: number): void {
    Atomics.store(this.header, RING.processedIndex, index);
  }

  /** Records written and not yet taken. */
  get pending(): number {
    return this.tail - this.taken;
  }

  /** Whether `count` more records fit, at the mean size of those written so far (1 KiB before any). */
  roomFor(count: number): boolean {
    const dataBytes = this.ring.byteLength - RING.dataOffset;
    const mean = this.tail > 0 ? this.written / this.tail : 1024;
    return this.pending + count <= RING.records && this.written - this.freed + count * mean <= dataBytes;
  }

  dest(): FrameDest {
    return { ring: this.ring, tail: this.tail, written: this.written, taken: this.taken, freed: this.freed };
  }

  wrote(result: FramesWritten): void {
    this.tail = result.tail;
    this.written = result.written;
    this.full = result.full;
    if (result.count > 0) this.lastDue = result.lastDue;
  }

  /** The next `count` records were released and their release taken: their room is free. */
  take(count: number): void {
    if (count <= 0) return;
    this.taken += count;
    this.freed = this.field(this.taken - 1, 'end');
    this.full = false;
  }

  /** A field of record `n` (counted since the buffer was made). */
  field(n: number, name: keyof typeof RECORD): number {
    return this.records[recordSlot(n) + RECORD[name]]!;
  }

  /** The event id of record `n`. */
  eventId(n: number): string {
    const at = RING.dataOffset + this.field(n, 'offset') + this.field(n, 'length');
    return this.bytes.toString('utf8', at, at + this.field(n, 'idLength'));
  }

  /** Record `n`'s frame as text, split where its lateness goes. */
  frame(n: number): LateFrame {
    const start = RING.dataOffset + this.field(n, 'offset');
    const lateAt = start + this.field(n, 'latenessAt');
    return {
      index: this.field(n, 'index'),
      head: this.bytes.toString('utf8', start, lateAt),
      tail: this.bytes.toString('utf8', lateAt, start + this.field(n, 'length')),
    };
  }
}
