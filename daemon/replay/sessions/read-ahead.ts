/**
 * Frames read ahead from one place in a transaction into one FrameBuffer:
 * its reader, where its records start in the replay, and the one read that
 * may be on its way (a query worker writing into the buffer). A seek reads
 * into a new one before the replay moves there; the Player plays one.
 */
import type { FrameBuffer } from '../lane/frame-buffer';
import type { FrameReader, Transaction } from './transaction';
import type { EventStart } from './transaction';
import type { Schedule } from '../../../core/replay/schedule';
import { CHECKPOINT_EVERY } from '../lane/frame-writer';

export class ReadAhead {
  /** the reader has no more events */
  exhausted = false;
  private inFlight: Promise<void> | null = null;
  private dropped = false;

  constructor(
    readonly buffer: FrameBuffer,
    private readonly reader: FrameReader,
    /** the replay index of the buffer's first record */
    readonly start: number,
    private readonly transaction: Transaction,
    private readonly schedule: Schedule,
    /** where every CHECKPOINT_EVERY-th event starts, by its index / CHECKPOINT_EVERY */
    private readonly checkpoints: EventStart[],
  ) {}

  static from(
    transaction: Transaction,
    schedule: Schedule,
    buffer: FrameBuffer,
    index: number,
    start: EventStart | undefined,
    checkpoints: EventStart[],
  ): ReadAhead {
    return new ReadAhead(buffer, transaction.frames(start), index, transaction, schedule, checkpoints);
  }

  get reading(): boolean {
    return this.inFlight !== null;
  }

  /** The replay index of the next record written. */
  get nextIndex(): number {
    return this.start + this.buffer.tail;
  }

  /**
   * Reads the next page into the buffer (or waits for the read on its way);
   * rejects with the store's error. Once dropped, what lands is ignored.
   */
  read(): Promise<void> {
    if (this.inFlight) return this.inFlight;
    const { buffer } = this;
    buffer.writing = true;
    const run = this.reader
      .fill(buffer, {
        firstTs: this.transaction.firstTs,
        speedFactor: this.schedule.speedFactor,
        extraLatencyNs: this.schedule.extraLatencyNs,
        firstIndex: this.nextIndex,
      })
      .then(
        (written) => {
          buffer.writing = false;
          this.inFlight = null;
          if (this.dropped) return;
          for (const c of written.checkpoints)
            this.checkpoints[c.index / CHECKPOINT_EVERY] = { ts: c.ts, eventId: c.eventId };
          if (this.reader.done) this.exhausted = true;
        },
        (err: unknown) => {
          buffer.writing = false;
          this.inFlight = null;
          throw err;
        },
      );
    this.inFlight = run;
    return run;
  }

  /** What lands from now on is ignored (the replay moved elsewhere). */
  drop(): void {
    this.dropped = true;
  }
}
