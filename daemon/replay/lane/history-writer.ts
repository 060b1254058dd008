/**
 * A resuming stream's history as bytes: a page of a transaction's events
 * framed as the live stream framed them, each with the lateness it was
 * released with. It runs where the page is read, as writeFrames does: on a
 * query worker for the node files, so that a stream cut in a dense replay
 * (100,000 events to send again) costs the main thread a write of bytes per
 * page, not a frame's text per event (a page framed there held the main
 * thread for 10–40 ms, the daemon's longest task during a dense replay).
 */
import type { EventPosition } from '../../store/event-filter';
import type { ReplayEvents } from '../replay-event';
import { emittedBefore, type FrameSpec } from './frame-writer';
import { lateFrameText, replayFrame } from './replay-frame';
import { Schedule } from '../../../core/replay/schedule';

export interface HistorySpec extends FrameSpec {
  /** the first index sent: the page's events before it only take their places */
  from: number;
  /** the lateness of events firstIndex, firstIndex + 1, …, as the clock released them (NaN: unknown); none past its end is sent */
  lateness: Float64Array;
}

export interface HistoryFrames {
  /** the frames, UTF-8 */
  bytes: Uint8Array;
  /** frames in `bytes` */
  events: number;
  /** places taken in the replay's order (the events before `from` too) */
  placed: number;
  /** where the next page starts after (the last event taken), null at the range's end */
  next: EventPosition | null;
}

const utf8 = new TextEncoder();

/** `page`'s events from `spec.from` on, each as its replay frame with its lateness. */
export function writeHistory(page: ReplayEvents, spec: HistorySpec): HistoryFrames {
  const schedule = new Schedule(spec.speedFactor, spec.extraLatencyNs);
  const n = page.length;
  let text = '';
  let events = 0;
  let placed = 0;
  let consumed = 0;
  for (; consumed < n && placed < spec.lateness.length; consumed++) {
    const event = page.at(consumed);
    if (emittedBefore(spec.skip, event)) continue;
    const index = spec.firstIndex + placed++;
    if (index < spec.from) continue;
    const late = spec.lateness[index - spec.firstIndex]!;
    text += lateFrameText(
      replayFrame(schedule, spec.firstTs, index, event),
      Number.isNaN(late) ? null : BigInt(late),
    );
    events++;
  }
  // a page asked for no more than the lateness covers ends early only if the store returned more
  const last = consumed > 0 && consumed < n ? page.at(consumed - 1) : undefined;
  // nothing taken (no lateness to send with): the history ends here rather than read the page again
  const next = consumed === n ? page.next : last ? { ts: last.timestamp_ns, eventId: last.event_id } : null;
  return { bytes: utf8.encode(text), events, placed, next };
}
