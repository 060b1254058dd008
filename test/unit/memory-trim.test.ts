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
    // a replay's stream closes, the daemon a few MiB larger: no collection
    heap += 20 << 20;
    memory.loadEnded();
    jest.advanceTimersByTime(2_000);
    expect(trims).toBe(0);
    // counted from the least seen: it shrank to 90, then a storm took it GROWTH_BYTES past that
    heap = 90 << 20;
    memory.loadEnded();
    jest.advanceTimersByTime(2_000);
    heap = (90 << 20) + GROWTH_BYTES;
    memory.loadEnded();
    jest.advanceTimersByTime(2_000);
    expect(trims).toBe(1);
    // from what the trim left (110), the same again is not enough
    heap = 130 << 20;
    memory.loadEnded();
    jest.advanceTimersByTime(2_000);
    expect(trims).toBe(1);
  });
});
