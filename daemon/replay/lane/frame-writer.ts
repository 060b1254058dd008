/**
 * Writes a page of a transaction's events as replay frames straight into a
 * lane's buffer (layout: clock-wire.ts RING and RECORD): the frame's bytes,
 * then its event id's, and one RECORD each with its due time. It runs where
 * the page is read: on a query worker for the node files, so a playing
 * session's main thread neither builds JSON nor copies a frame; on the main
 * thread for the stores read over HTTP (ClickHouse) and in tests.
 *
 * The writer stops where the buffer has no room (its records or bytes, as
 * the main thread last freed them) and says where the page was left.
 */
import type { EventPosition } from '../../store/event-filter';
import { RING, ringRecords, writeRecord } from './lane-layout';
import type { ReplayEvent, ReplayEvents } from '../replay-event';
import { replayFrame } from './replay-frame';
import { Schedule } from '../../../core/replay/schedule';

/** What the frames are made of: the session's schedule and where the page's events stand in the replay. */
export interface FrameSpec {
  firstTs: bigint;
  speedFactor: number;
  extraLatencyNs: bigint;
  /** the replay index of the first event written */
  firstIndex: number;
  /** events at this start's timestamp ordered before its id were emitted already: skipped */
  skip?: EventPosition;
}

/** Where they go: the buffer, its counts of records and bytes written, and how far the main thread has freed them. */
export interface FrameDest {
  ring: SharedArrayBuffer;
  tail: number;
  written: number;
  taken: number;
  freed: number;
}

export interface FramesWritten {
  /** events the page had */
  read: number;
  /** frames written */
  count: number;
  tail: number;
  written: number;
  /** where the next read starts after: the last event consumed (written or skipped), the page's own next once all were, undefined when none was */
  next: EventPosition | null | undefined;
  /** the buffer had no room for the next frame */
  full: boolean;
  /** where each event whose index is a multiple of `checkpointEvery` starts */
  checkpoints: { index: number; ts: bigint; eventId: string }[];
  /** wall offset of the last frame written, -1 if none */
  lastDue: number;
}

/** Where every 1024th event starts, so a resuming stream re-reads at most 1023 events to find its place. */
export const CHECKPOINT_EVERY = 1024;

/** Whether `event` was emitted already: at the start's timestamp, ordered before its id (FrameSpec.skip). */
export function emittedBefore(skip: EventPosition | undefined, event: ReplayEvent): boolean {
  return skip !== undefined && event.timestamp_ns === skip.ts && event.event_id < skip.eventId;
}

/** Writes `events` as frames into `dest` as far as they fit. */
export function writeFrames(events: ReplayEvents, spec: FrameSpec, dest: FrameDest): FramesWritten {
  const schedule = new Schedule(spec.speedFactor, spec.extraLatencyNs);
  const bytes = Buffer.from(dest.ring);
  const records = ringRecords(dest.ring);
  const dataBytes = dest.ring.byteLength - RING.dataOffset;
  const n = events.length;
  let { tail, written } = dest;
  let count = 0;
  let consumed = 0;
  let lastDue = -1;
  let full = false;
  const checkpoints: FramesWritten['checkpoints'] = [];
  for (; consumed < n; consumed++) {
    const event = events.at(consumed);
    if (emittedBefore(spec.skip, event)) continue;
    const { timestamp_ns: ts, event_id: eventId } = event;
    const index = spec.firstIndex + count;
    const frame = replayFrame(schedule, spec.firstTs, index, event);
    // at most 3 UTF-8 bytes per UTF-16 unit: room is checked without encoding
    const most = 3 * (frame.head.length + frame.tail.length + eventId.length);
    let offset = written % dataBytes;
    const skip = offset + most > dataBytes ? dataBytes - offset : 0;
    if (skip > 0) offset = 0;
    if (tail - dest.taken >= RING.records || written + skip + most - dest.freed > dataBytes) {
      full = true;
      break;
    }
    const at = RING.dataOffset + offset;
    const head = bytes.write(frame.head, at, 'utf8');
    const length = head + bytes.write(frame.tail, at + head, 'utf8');
    const idLength = bytes.write(eventId, at + length, 'utf8');
    written += skip + length + idLength;
    const recordedNs = ts - spec.firstTs;
    const due = Number(schedule.wallOffset(index, recordedNs));
    writeRecord(records, tail, {
      offset,
      length,
      latenessAt: head,
      index,
      due,
      end: written,
      recorded: Number(recordedNs),
      idLength,
    });
    if (index % CHECKPOINT_EVERY === 0) checkpoints.push({ index, ts, eventId });
    lastDue = due;
    tail++;
    count++;
  }
  const last = consumed < n && consumed > 0 ? events.at(consumed - 1) : undefined;
  const next = consumed === n ? events.next : last && { ts: last.timestamp_ns, eventId: last.event_id };
  return { read: n, count, tail, written, next, full, checkpoints, lastDue };
}
