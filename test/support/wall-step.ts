/**
 * The process's wall clock (Date.now) stepped as NTP, a restored VM snapshot or `date -s` steps a
 * host's, over the real one: the machine's clock is shared with other tests and never touched.
 * `new Date()` without an argument does not go through Date.now and is not stepped.
 */
export function useWallStep(): { step(ms: number): void } {
  let offsetMs = 0;
  beforeEach(() => {
    offsetMs = 0;
    const real = Date.now.bind(Date);
    jest.spyOn(Date, 'now').mockImplementation(() => real() + offsetMs);
  });
  afterEach(() => jest.restoreAllMocks());
  return { step: (ms) => void (offsetMs += ms) };
}

export const HOUR_MS = 3_600_000;
