/** The agent's status line's timer: woken when the line is due, not to look whether it is. */
import { DueTimer } from '../../agent/due-timer';

/** Counts the callbacks every timer set from now makes (setTimeout's and setInterval's): the wake-ups. */
function countWakeUps(): () => number {
  let woken = 0;
  for (const name of ['setTimeout', 'setInterval'] as const) {
    const original = global[name];
    jest.spyOn(global, name).mockImplementation(((fn: () => void, ms?: number) =>
      original(() => {
        woken++;
        fn();
      }, ms)) as typeof original);
  }
  return () => woken;
}

/** A task due `everyMs` after it last ran (as the status line), its runs (ms from the start), and the wake-ups. */
function statusLike(everyMs: number): {
  timer: DueTimer;
  runs: number[];
  wakeUps: () => number;
  run: () => void;
} {
  const start = performance.now();
  const runs: number[] = [];
  let last = start;
  const run = (): void => {
    runs.push(performance.now() - start);
    last = performance.now();
  };
  const wakeUps = countWakeUps();
  return { timer: new DueTimer(() => last + everyMs, run), runs, wakeUps, run };
}

describe('DueTimer', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => {
    jest.restoreAllMocks();
    jest.useRealTimers();
  });

  it('runs a task due every 5 s at 5, 10 … 60 s, woken once for each (a check every 100 ms woke 600 times)', () => {
    const status = statusLike(5000);
    status.timer.start();
    jest.advanceTimersByTime(60_000);
    status.timer.stop();
    expect(status.runs).toEqual(Array.from({ length: 12 }, (_, i) => (i + 1) * 5000));
    expect(status.wakeUps()).toBe(12);
  });

  it('waits for the new due time when the task ran elsewhere meanwhile', () => {
    const status = statusLike(1000);
    status.timer.start();
    jest.advanceTimersByTime(700);
    status.run(); // the decode path's line at 700 ms: the next is due at 1,700
    jest.advanceTimersByTime(2300);
    status.timer.stop();
    expect(status.runs).toEqual([700, 1700, 2700]);
    // at 1,000 nothing was due (the timer is set again for 1,700), then one a run
    expect(status.wakeUps()).toBe(3);
  });

  it('never runs the task before it is due, nor after stop()', () => {
    const status = statusLike(1000);
    status.timer.start();
    jest.advanceTimersByTime(999);
    expect(status.runs).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(status.runs).toEqual([1000]);
    status.timer.stop();
    jest.advanceTimersByTime(10_000);
    expect(status.runs).toEqual([1000]);
    expect(jest.getTimerCount()).toBe(0);
  });
});
