/**
 * A lane's buffer in shared memory: the records of its deadlines and the
 * bytes of their frames. The read-ahead writes it (frame-writer.ts), the
 * clock thread releases from it and the main thread reads it back
 * (frame-buffer.ts). Every index is named, and every width is derived from
 * the names.
 *
 * Slots hold Float64s: exact integers up to 2^53, with no allocation on the
 * clock thread's side.
 */
import { indexOf } from '../slot-index';

/** A frame in a lane's ring, as the clock keeps it: where it starts, its length (0: no frame), where its lateness goes, its event index. */
const FRAME_NAMES = ['offset', 'length', 'latenessAt', 'index'] as const;
export const FRAME = indexOf(FRAME_NAMES);
export const FRAME_WIDTH = FRAME_NAMES.length;
export type FrameFields = Record<(typeof FRAME_NAMES)[number], number>;

/**
 * A deadline in a lane's buffer, as the read-ahead writes it (a query
 * worker, frame-writer.ts): its frame (FRAME's fields first, so a record is
 * a frame for the sockets); when it is due as a wall offset from the lane's
 * anchor (ANCHOR), so records written before a play or kept across a pause
 * stay valid; where its bytes end in the count of bytes written (freed once
 * the main thread has taken its release); its recorded offset from the
 * transaction's first event; and the length of its event id, whose bytes
 * follow the frame's.
 */
const RECORD_NAMES = [...FRAME_NAMES, 'due', 'end', 'recorded', 'idLength'] as const;
export const RECORD = indexOf(RECORD_NAMES);
export const RECORD_WIDTH = RECORD_NAMES.length;
export type RecordFields = Record<(typeof RECORD_NAMES)[number], number>;

/**
 * Records a lane's buffer holds: a power of two. A dense replay's read-ahead
 * is bounded by it (and by the bytes), so it is large: 256 Ki records of
 * 64 bytes, 16 MiB, committed only as far as written.
 */
const RING_RECORDS = 1 << 18;
const RING_RECORDS_OFFSET = 64;
/**
 * Bytes of frames a lane's buffer holds (the high-resolution clock's): a
 * sparse replay's quarter second fits in 16 MiB; a dense one primes up to a
 * second of frames (~470 bytes each: all of a 200,000-event incident) in
 * 128 MiB. Shared memory is committed as it is written, and a buffer that
 * wraps around has written all of it, so a session takes the large one only
 * when its density needs it.
 */
const RING_DATA_BYTES = 16 << 20;
const DENSE_RING_DATA_BYTES = 128 << 20;

/**
 * A lane's buffer: Int32 words of its header, a ring of `records` RECORDs
 * (Float64s from recordsOffset, record n at slot n mod records), then the
 * frames' bytes from dataOffset to the buffer's end (`dataBytes` in the
 * clock's buffers; a test's may be smaller).
 */
export const RING = {
  /** the next event index the main thread has not yet taken the release of */
  processedIndex: 0,
  headerWords: 1,
  records: RING_RECORDS,
  recordsOffset: RING_RECORDS_OFFSET,
  dataOffset: RING_RECORDS_OFFSET + Float64Array.BYTES_PER_ELEMENT * RECORD_WIDTH * RING_RECORDS,
  dataBytes: RING_DATA_BYTES,
  denseDataBytes: DENSE_RING_DATA_BYTES,
} as const;

/** The records of a lane's buffer. */
export function ringRecords(ring: SharedArrayBuffer): Float64Array {
  return new Float64Array(ring, RING.recordsOffset, RECORD_WIDTH * RING.records);
}

/** A new lane buffer whose frames may take `dataBytes`. */
export function laneBuffer(dataBytes: number = RING.dataBytes): SharedArrayBuffer {
  return new SharedArrayBuffer(RING.dataOffset + dataBytes);
}

/** Where record `n` (counted since the buffer was made) starts in ringRecords(). */
export function recordSlot(n: number): number {
  return (n & (RING.records - 1)) * RECORD_WIDTH;
}

/** Writes record `n` of `records` (ringRecords()), every field by name. */
export function writeRecord(records: Float64Array, n: number, fields: RecordFields): void {
  const at = recordSlot(n);
  for (const name of RECORD_NAMES) records[at + RECORD[name]] = fields[name];
}
