/** Which parts' time ranges may hold copies of one event (daemon/store/clickhouse-events.ts countLookup). */
import { overlaps } from '../../daemon/store/clickhouse-events';

const part = (n: number, first: number, last: number) => ({ n, first: BigInt(first), last: BigInt(last) });

describe('overlaps', () => {
  it('counts parts that meet no other plainly', () => {
    expect(overlaps([part(5, 30, 40), part(3, 0, 10), part(2, 11, 29)])).toEqual({ alone: 10, shared: [] });
    expect(overlaps([])).toEqual({ alone: 0, shared: [] });
  });

  it('joins chains of parts that meet, an equal timestamp included, into one range', () => {
    expect(
      overlaps([
        part(4, 0, 10),
        part(1, 10, 10),
        part(7, 50, 60),
        part(2, 5, 20),
        part(3, 18, 30),
        part(9, 61, 70),
      ]),
    ).toEqual({ alone: 16, shared: [[0n, 30n]] });
    // a part inside another's range
    expect(overlaps([part(100, 0, 100), part(1, 40, 41), part(1, 200, 300)])).toEqual({
      alone: 1,
      shared: [[0n, 100n]],
    });
  });
});
