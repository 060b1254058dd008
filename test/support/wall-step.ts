/**
 * The process's wall clock (Date.now) stepped as NTP, a restored VM snapshot or `date -s` steps a
 * host's, over the real one: the machine's clock is shared with other tests and never touched.
 * `new Date()` without an argument does not go through Date.now and is not stepped.
 */
export function useWallStep(): {
  /** one step now (back with a negative ms) */
  step(ms: number): void;
  /** a step at every read from now on: each read of Date.now is `ms` past the last one's offset */
  stepEveryRead(ms: number): void;
} {
  let offsetMs = 0;
  let perReadMs = 0;
  let spy: jest.SpiedFunction<typeof Date.now> | undefined;
  beforeEach(() => {
    offsetMs = 0;
    perReadMs = 0;
    const real = Date.now.bind(Date);
    spy = jest.spyOn(Date, 'now').mockImplementation(() => real() + (offsetMs += perReadMs));
  });
  afterEach(() => spy?.mockRestore());
  return {
    step: (ms) => void (offsetMs += ms),
    stepEveryRead: (ms) => void (perReadMs = ms),
  };
}

export const HOUR_MS = 3_600_000;
