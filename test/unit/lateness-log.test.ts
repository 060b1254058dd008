import { LatenessLog } from '../../daemon/replay/lateness-log';

describe('LatenessLog', () => {
  it('gives back each index its lateness exactly, across pages, and null where none was set', () => {
    const log = new LatenessLog();
    const big = 2n ** 53n - 1n;
    for (const [index, late] of [
      [0, 0n],
      [65_535, 7n],
      [65_536, 123_456_789_012n],
      [1_000_000, big],
    ] as const)
      log.set(index, late);
    expect([0, 65_535, 65_536, 1_000_000].map((i) => log.get(i))).toEqual([0n, 7n, 123_456_789_012n, big]);
    expect([1, 65_537, 999_999, 5_000_000].map((i) => log.get(i))).toEqual([null, null, null, null]);
  });

  it('keeps the latest release of an index (a seek back plays it again)', () => {
    const log = new LatenessLog();
    log.set(42, 10n);
    log.set(42, 3n);
    expect(log.get(42)).toBe(3n);
  });
});
