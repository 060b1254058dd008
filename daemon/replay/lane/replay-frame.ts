/**
 * A replay event's SSE frame as sessions send it (docs/replay.md, "Timing"): built
 * once, when the event is read, as the text sseFrame('replay',
 * withJsonFields(json, extra), index) would be, split at its lateness. Built
 * here directly, since a dense replay builds one per event.
 */
import type { ReplayEvent } from '../replay-event';
import type { Schedule } from '../../../core/replay/schedule';

/**
 * A replay frame whose lateness is known only at release: `head`, the
 * lateness in ns as digits, then `tail`. The clock writes it to the lane's
 * sockets itself where it can (LaneSockets).
 */
export interface LateFrame {
  /** the event's index in the replay */
  index: number;
  head: string;
  tail: string;
}

/** The frame's end once its lateness (the data's last field) is written. */
const TAIL = '}\n\n';

/** Event `index`'s replay frame, its lateness (the last field) left to fill in at release. */
export function replayFrame(
  schedule: Schedule,
  firstTs: bigint,
  index: number,
  event: ReplayEvent,
): LateFrame {
  const offset = schedule.wallOffset(index, event.timestamp_ns - firstTs);
  const duration = schedule.replayedDuration(event.duration_ns);
  // the event's JSON is an object: its closing brace gives way to the replay's fields
  const head =
    `id: ${index}\nevent: replay\ndata: ${event.json.slice(0, -1)},` +
    `"replay_offset_ns":${offset},"replayed_duration_ns":${duration},"emitted_late_ns":`;
  return { index, head, tail: TAIL };
}

/** The frame's text with its lateness in ns (null: not known, as for history read back from the store). */
export function lateFrameText(frame: LateFrame, lateNs: bigint | null): string {
  return `${frame.head}${lateNs === null ? 'null' : lateNs}${frame.tail}`;
}
