/** Memory is given back once per storm: after the load ends and stays ended for a quiet moment. */
import { MemoryTrim } from '../../daemon/http/memory-trim';

describe('MemoryTrim', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('trims once after the last of a burst of ends, not on each', () => {
    let trims = 0;
    const memory = new MemoryTrim(() => void trims++);
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
});
