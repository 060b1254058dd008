/** A replay event's SSE frame as sessions send it (README, "Timing"): built once, when the event is read. */
import { withJsonFields } from '../../../core/model';
import type { LateFrame } from '../replay-clock';
import type { ReplayEvent } from '../replay-event';
import { splitLateFrame, sseFrame } from '../stream/sse-frame';
import type { Schedule } from './schedule';

/** Event `index`'s replay frame, its lateness (the last field) left to fill in at release. */
export function replayFrame(
  schedule: Schedule,
  firstTs: bigint,
  index: number,
  event: ReplayEvent,
): LateFrame {
  const extra = {
    replay_offset_ns: schedule.wallOffset(index, event.timestamp_ns - firstTs),
    replayed_duration_ns: schedule.replayedDuration(event.duration_ns),
    emitted_late_ns: null,
  };
  return splitLateFrame(index, sseFrame('replay', withJsonFields(event.json, extra), index));
}
