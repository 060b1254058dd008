import { withJsonFields } from '../../core/model';
import { lateFrameText, replayFrame } from '../../daemon/replay/lane/replay-frame';
import { Schedule } from '../../core/replay/schedule';
import { sseFrame } from '../../daemon/replay/stream/sse-frame';

describe('replayFrame', () => {
  it('is the SSE frame of the event with the replay fields added, split where its lateness goes', () => {
    const schedule = new Schedule(0.3, 17n);
    const firstTs = 1_795_000_000_123_456_789n;
    const event = {
      timestamp_ns: firstTs + 1_234_567n,
      duration_ns: 9_999n,
      event_id: 'n1:42',
      json: '{"event_id":"n1:42","target":"caf\u00e9 \\"x\\"","timestamp_ns":1795000000124691356}',
    };
    const frame = replayFrame(schedule, firstTs, 42, event);
    const extra = {
      replay_offset_ns: schedule.wallOffset(42, 1_234_567n),
      replayed_duration_ns: schedule.replayedDuration(9_999n),
    };
    for (const late of [null, 0n, 123_456_789_012n])
      expect(lateFrameText(frame, late)).toBe(
        sseFrame('replay', withJsonFields(event.json, { ...extra, emitted_late_ns: late }), 42),
      );
    expect(frame.index).toBe(42);
  });
});
