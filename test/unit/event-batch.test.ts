/** The batch's own reading of its rows (agent/ingest/event-batch.ts). */
import { EventBatch } from '../../agent/ingest/event-batch';

const row = { dur: 1, service: 1, ctx: 0, pid: 1, tid: 1, comm: 1, bytes: 1, fd: 1, ret: 1, syscall: 1 };

describe('event batch', () => {
  it("bounds its rows' stamps from below: the base, or a row's before it (rows of several CPUs come out of order)", () => {
    const batch = new EventBatch(4);
    batch.clear(1_000_000n);
    expect(batch.minTs()).toBe(1_000_000n);
    for (const tsOffset of [0, 250, -40, 10]) batch.pushSysWrite({ ...row, tsOffset });
    expect(batch.minTs()).toBe(999_960n);
    batch.clear(5n);
    batch.pushSysWrite({ ...row, tsOffset: 7 });
    expect(batch.minTs()).toBe(5n);
  });
});
