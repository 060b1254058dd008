/** The system wall clock's timers: due at their time, cancellable, and a TTL of days is not fired at once. */
import { systemWallClock } from '../../daemon/replay/sessions/wall-clock';

describe('systemWallClock', () => {
  beforeEach(() => jest.useFakeTimers({ now: Date.parse('2026-01-01T00:00:00Z') }));
  afterEach(() => jest.useRealTimers());

  it('fires at its time and not before, or never once cancelled', () => {
    const fired: string[] = [];
    systemWallClock.at(systemWallClock.nowMs() + 1000, () => fired.push('a'));
    const cancel = systemWallClock.at(systemWallClock.nowMs() + 500, () => fired.push('b'));
    cancel();
    jest.advanceTimersByTime(999);
    expect(fired).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(fired).toEqual(['a']);
  });

  it('waits out a time beyond setTimeout’s 24.8-day limit in steps', () => {
    const days = 30 * 86_400_000;
    let fired = false;
    systemWallClock.at(systemWallClock.nowMs() + days, () => (fired = true));
    jest.advanceTimersByTime(2 ** 31 - 1);
    expect(fired).toBe(false);
    jest.advanceTimersByTime(days - (2 ** 31 - 1) - 1);
    expect(fired).toBe(false);
    jest.advanceTimersByTime(1);
    expect(fired).toBe(true);
  });

  it('fires at once for a time already past', () => {
    let fired = false;
    systemWallClock.at(systemWallClock.nowMs() - 5, () => (fired = true));
    jest.advanceTimersByTime(0);
    expect(fired).toBe(true);
  });
});
