/** Memory is given back once per storm: after the load ends and stays ended for a quiet moment. */
import type { HeapSpaceInfo } from 'node:v8';
import { GROWTH_BYTES, MemoryTrim, oldGenerationBytes } from '../../daemon/http/memory-trim';

const MiB = 2 ** 20;
/** V8's heap spaces as getHeapSpaceStatistics() gives them, the committed size of each in MiB. */
const spaces = (committed: Record<string, number>): HeapSpaceInfo[] =>
  Object.entries(committed).map(([name, size]) => ({
    space_name: name,
    space_size: size * MiB,
    space_used_size: 0,
    space_available_size: 0,
    physical_space_size: size * MiB,
  }));
/** The daemon's heap as measured (--require'd getHeapSpaceStatistics) idle, after a dense replay, after an SSE storm. */
const IDLE = spaces({
  new_space: 16,
  old_space: 14.9,
  code_space: 0.8,
  trusted_space: 2.6,
  large_object_space: 0.8,
});
const DENSE = spaces({
  new_space: 64,
  old_space: 25.2,
  code_space: 2,
  trusted_space: 3.9,
  large_object_space: 0.8,
});
const STORM = spaces({
  new_space: 128,
  old_space: 43.2,
  code_space: 2.3,
  trusted_space: 3.9,
  large_object_space: 0.8,
});

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
    // a replay's stream closes, the heap 12 MiB larger: no collection
    expect(endAt(112 << 20)).toBe(0);
    // counted from the least seen: it shrank to 90, then a storm took it GROWTH_BYTES past that
    expect(endAt(90 << 20)).toBe(0);
    expect(endAt((90 << 20) + GROWTH_BYTES)).toBe(1);
    // from what the trim left (110), 12 MiB more is not enough
    expect(endAt(122 << 20)).toBe(1);
  });

  it('counts the old generation, not the young one V8 sized for a dense replay: its end costs no full collection', () => {
    let trims = 0;
    let heap = IDLE;
    const memory = new MemoryTrim(
      () => void trims++,
      () => oldGenerationBytes(heap),
    );
    const endWith = (now: HeapSpaceInfo[]) => {
      heap = now;
      memory.loadEnded();
      jest.advanceTimersByTime(2_000);
      return trims;
    };
    // the whole heap grew by 60 MiB over the replay (most of it the young generation): left alone
    expect(endWith(DENSE)).toBe(0);
    expect(endWith(IDLE)).toBe(0);
    // a storm's sockets and requests, promoted, grow the old generation past GROWTH_BYTES: trimmed
    expect(endWith(STORM)).toBe(1);
    expect(oldGenerationBytes(DENSE) - oldGenerationBytes(IDLE)).toBeLessThan(GROWTH_BYTES);
    expect(oldGenerationBytes(STORM) - oldGenerationBytes(IDLE)).toBeGreaterThanOrEqual(GROWTH_BYTES);
  });
});
