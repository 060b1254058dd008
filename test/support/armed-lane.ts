/**
 * Deadlines on a clock lane as tests hand them: each `at` writes one record
 * (due from the lane's anchor, with a frame if given) into the lane's
 * FrameBuffer, as a session's read-ahead does, and publishes it.
 */
import { FrameBuffer } from '../../daemon/replay/lane/frame-buffer';
import { RING, writeRecord } from '../../daemon/replay/lane/lane-layout';
import type { ClockLane, ReplayClock } from '../../daemon/replay/replay-clock';
import type { LateFrame } from '../../daemon/replay/lane/replay-frame';

export class ArmedLane {
  readonly buffer: FrameBuffer;
  private readonly anchor: bigint;
  private playing = false;

  constructor(
    clock: ReplayClock,
    readonly lane: ClockLane,
  ) {
    this.buffer = clock.frameBuffer(false);
    this.anchor = clock.now();
  }

  /** Released once monotonic time reaches `deadline` (not before the lane's anchor). */
  at(deadline: bigint, frame?: LateFrame): void {
    const { buffer } = this;
    const bytes = Buffer.from(buffer.ring);
    const offset = buffer.written % (buffer.ring.byteLength - RING.dataOffset);
    const head = frame ? bytes.write(frame.head, RING.dataOffset + offset) : 0;
    const length = frame ? head + bytes.write(frame.tail, RING.dataOffset + offset + head) : 0;
    buffer.written += length;
    writeRecord(buffer.records, buffer.tail, {
      offset,
      length,
      latenessAt: head,
      index: frame?.index ?? buffer.tail,
      due: Number(deadline - this.anchor),
      end: buffer.written,
      recorded: 0,
      idLength: 0,
    });
    buffer.tail++;
    if (this.playing) return this.lane.publish();
    this.playing = true;
    this.lane.play(buffer, () => this.anchor);
  }

  /** The lane's clear: nothing more is released until the next `at` plays the lane again. */
  clear(forGood = false) {
    this.playing = false;
    return this.lane.clear(forGood);
  }
}
