import { withJsonFields } from '../../core/model';
import { lateFrameText, replayFrame } from '../../daemon/replay/lane/replay-frame';
import { Schedule } from '../../core/replay/schedule';
import { sseFrame } from '../../daemon/replay/stream/sse-frame';
import { writeFrames } from '../../daemon/replay/lane/frame-writer';
import { laneBuffer } from '../../daemon/replay/lane/lane-layout';
import type { ReplayEvents } from '../../daemon/replay/replay-event';
import type { EventPage } from '../../daemon/store/event-filter';
import { EVENT_SOURCES, fakeEvent } from '../support/fake-transaction-reader';

const T0 = 1_795_000_000_000_000_000n;

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

describe('writeFrames', () => {
  // 40 events, a few sharing a timestamp, one with a non-ASCII target
  const events = Array.from({ length: 40 }, (_, i) => ({
    ...fakeEvent('tx', T0 + BigInt(Math.floor(i / 3) * 1000), i),
    ...(i === 7 ? { target: 'caf\u00e9' } : {}),
  }));
  const page = { events, next: { ts: T0 + 99_000n, eventId: 'zz' } };

  /** what `of` the page writes into a buffer of `dataBytes`, and what it says */
  function framed(of: (p: EventPage) => ReplayEvents, dataBytes: number) {
    const ring = laneBuffer(dataBytes);
    const dest = { ring, tail: 0, written: 0, taken: 0, freed: 0 };
    const skip = { ts: events[4]!.timestamp_ns, eventId: events[4]!.event_id };
    const written = writeFrames(
      of({ events: events.slice(3), next: page.next }),
      { firstTs: T0, speedFactor: 0.5, extraLatencyNs: 7n, firstIndex: 3, skip },
      dest,
    );
    // the whole buffer: its records and its frames' bytes
    return { written, bytes: Buffer.from(ring) };
  }

  it.each([
    ['with room for the page', 64 * 1024],
    ['filled part way', 4 * 1024],
  ])(
    'writes a page framed where it was read as it writes a chunk posted from a worker, %s',
    (_, dataBytes) => {
      const [[, viaChunk], [, viaPage]] = EVENT_SOURCES;
      const fromChunk = framed(viaChunk, dataBytes);
      const fromPage = framed(viaPage, dataBytes);
      expect(fromPage.written).toEqual(fromChunk.written);
      expect(fromPage.bytes.equals(fromChunk.bytes)).toBe(true);
      // events[3] is skipped (before [4] at its timestamp): [4] is the first frame
      expect(fromChunk.written.count).toBeGreaterThan(0);
      if (dataBytes < 64 * 1024) {
        expect(fromChunk.written.full).toBe(true);
        const last = events[3 + fromChunk.written.count]!;
        expect(fromChunk.written.next).toEqual({ ts: last.timestamp_ns, eventId: last.event_id });
      } else {
        expect(fromChunk.written).toMatchObject({ full: false, count: 36, next: page.next });
      }
    },
  );
});
