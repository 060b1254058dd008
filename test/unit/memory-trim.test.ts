/** Memory is given back once per storm: after the load ends and stays ended for a quiet moment. */
import { GROWTH_BYTES, MemoryTrim } from '../../daemon/http/memory-trim';

describe('MemoryTrim', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('trims once after the last of a burst of ends, not on each', () => {
    let trims = 0;
    let heap = 100 << 20;
    const memory = new MemoryTrim(
      () => void trims++,
      () => heap,
    );
    heap += GROWTH_BYTES;
    for (let i = 0; i < 100; i++) {
      memory.loadEnded();
      jest.advanceTimersByTime(100);
    }
    expect(trims).toBe(0);
    jest.advanceTimersByTime(2_000);
    expect(trims).toBe(1);
    memory.loadEnded();
    memory.close();
    jest.advanceTimersByTime(5_000);
    expect(trims).toBe(1);
  });

  it('leaves a load that grew the heap less than a storm alone: a full collection stops every answer', () => {
    let trims = 0;
    let heap = 100 << 20;
    const memory = new MemoryTrim(
      () => {
        trims++;
        heap = 110 << 20;
      },
      () => heap,
    );
    // a load ends with the heap at `bytes`, and the quiet passes
    const endAt = (bytes: number) => {
      heap = bytes;
      memory.loadEnded();
      jest.advanceTimersByTime(2_000);
      return trims;
    };
    // a replay's stream closes, the heap 20 MiB larger: no collection
    expect(endAt(120 << 20)).toBe(0);
    // counted from the least seen: it shrank to 90, then a storm took it GROWTH_BYTES past that
    expect(endAt(90 << 20)).toBe(0);
    expect(endAt((90 << 20) + GROWTH_BYTES)).toBe(1);
    // from what the trim left (110), 20 MiB more is not enough
    expect(endAt(130 << 20)).toBe(1);
  });
});
