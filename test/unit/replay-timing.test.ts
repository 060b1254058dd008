import type { ProbeResult } from '../../bench/replay-probe';
import { timing } from '../../bench/replay-timing';

const MS = 1e6;
const START = 1_000_000 * MS;

/** Five events 10 ms apart, each reaching the probe `delays` ms after its schedule, released `releases` ms late. */
function probe(delays: number[], releases: number[]): ProbeResult {
  const offsets = delays.map((_, i) => i * 10 * MS);
  return {
    events: delays.length,
    outOfOrder: 0,
    cuts: 0,
    nullLateness: releases.filter(Number.isNaN).length,
    arrivals: offsets.map((offset, i) => START + offset + delays[i]! * MS),
    offsets,
    released: releases.map((ms) => ms * MS),
  };
}

describe('a replay probe against the schedule', () => {
  it('names the latest event and the lateness the daemon released it with: late at the daemon', () => {
    const t = timing(probe([0.1, 0.2, 3.1, 0.1, 0.2], [0, 0.05, 2.9, 0, 0]));
    expect(t.latest).toEqual({ index: 2, release: 2.9 });
    expect(t.late.max).toBeCloseTo(3.0, 9);
  });

  it('the same for an event the daemon released on time and a later hop held', () => {
    const t = timing(probe([0.3, 0.2, 0.3, 0.2, 7.2], [0, 0, 0, 0.1, 0]));
    expect(t.latest).toEqual({ index: 4, release: 0 });
    expect(t.late.max).toBeCloseTo(7.0, 9);
    expect(t.vsFirst.max).toBeCloseTo(6.9, 9);
  });

  it('a latest event whose lateness is null (read back after a cut) has none', () => {
    const t = timing(probe([0.1, 5.1, 0.1], [0, NaN, 0]));
    expect(t.latest.index).toBe(1);
    expect(t.latest.release).toBeNaN();
    expect(t.releaseP99).toBe(0);
  });
});
