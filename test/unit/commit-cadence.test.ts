/** The agent's commit cadence: given when rows arrive, when they are committed. */
import { CommitCadence, commitRule, MAX_COMMIT_WAIT_MS, type CommitRule } from '../../agent/commit-cadence';

const RULE = commitRule(MAX_COMMIT_WAIT_MS.default);
const { quietMs, maxWaitMs } = RULE;

interface Commit {
  at: number;
  /** the arrival times of the rows it held */
  rows: number[];
}

/** Rows arriving at these times (ms from 0, ascending), then nothing for a while: the commits made. */
function commitsFor(arrivals: number[], fullAt: number[] = [], rule: CommitRule = RULE): Commit[] {
  const start = performance.now();
  const commits: Commit[] = [];
  let pending: number[] = [];
  const cadence = new CommitCadence(() => {
    commits.push({ at: performance.now() - start, rows: pending });
    pending = [];
  }, rule);
  const events = [
    ...arrivals.map((at) => ({ at, full: false })),
    ...fullAt.map((at) => ({ at, full: true })),
  ].sort((a, b) => a.at - b.at);
  for (const { at, full } of events) {
    jest.advanceTimersByTime(at - (performance.now() - start));
    if (full) {
      // the decoder handed a full batch over itself
      commits.push({ at, rows: pending });
      pending = [];
      cadence.committed();
    } else {
      pending.push(at);
      cadence.arrived();
    }
  }
  jest.advanceTimersByTime(10 * rule.maxWaitMs);
  expect(pending).toEqual([]);
  cadence.stop();
  return commits;
}

const every = (gapMs: number, untilMs: number, from = 0): number[] =>
  Array.from({ length: Math.floor((untilMs - from) / gapMs) }, (_, i) => from + i * gapMs);

/**
 * Each row in exactly one commit, none empty, none held past the max wait; and each commit made
 * either the quiet after its last row, with no row arrived meanwhile, or at its last row's arrival,
 * once its oldest could not wait for another quiet.
 */
function expectEachOnceInTime(arrivals: number[], commits: Commit[]): void {
  expect(commits.flatMap((c) => c.rows)).toEqual(arrivals);
  for (const commit of commits) {
    expect(commit.rows.length).toBeGreaterThan(0);
    const oldest = commit.rows[0]!;
    const last = commit.rows.at(-1)!;
    expect(commit.at - oldest).toBeLessThanOrEqual(maxWaitMs);
    if (commit.at === last) expect(commit.at + quietMs).toBeGreaterThanOrEqual(oldest + maxWaitMs);
    else expect(commit.at).toBe(last + quietMs);
  }
}

describe('CommitCadence', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('commits a steady stream (a poll every 100 ms) about once a second, not every 200 ms', () => {
    const arrivals = every(100, 5000);
    const commits = commitsFor(arrivals);
    expectEachOnceInTime(arrivals, commits);
    // held until the oldest is 850 ms old: the arrival at 900 ms, then every 1,000 ms
    expect(commits.map((c) => c.at)).toEqual([900, 1900, 2900, 3900, 4900]);
  });

  it("commits a burst's rows the quiet after its last, in one commit", () => {
    const arrivals = [...every(10, 300), 300];
    const commits = commitsFor(arrivals);
    expect(commits).toEqual([{ at: 300 + quietMs, rows: arrivals }]);
  });

  it('commits a lone row after the quiet, and a burst after a pause on its own', () => {
    const commits = commitsFor([0, 2000, 2050]);
    expect(commits).toEqual([
      { at: quietMs, rows: [0] },
      { at: 2050 + quietMs, rows: [2000, 2050] },
    ]);
  });

  it('holds no row past the max wait when rows arrive just inside the quiet', () => {
    const gap = quietMs - 10;
    const arrivals = every(gap, 3000);
    const commits = commitsFor(arrivals);
    expectEachOnceInTime(arrivals, commits);
    // each commit at the first arrival at which the oldest could not wait for another quiet
    for (const commit of commits.slice(0, -1)) {
      const age = commit.at - commit.rows[0]!;
      expect(age + quietMs).toBeGreaterThanOrEqual(maxWaitMs);
      expect(age + quietMs - gap).toBeLessThan(maxWaitMs);
    }
  });

  it('commits rows further apart than the quiet one by one', () => {
    const arrivals = every(quietMs + 50, 2000);
    const commits = commitsFor(arrivals);
    expect(commits).toEqual(arrivals.map((at) => ({ at: at + quietMs, rows: [at] })));
  });

  it('holds every row of an irregular stream once, within the max wait', () => {
    // a fixed pseudo-random sequence of gaps from 0 to 300 ms
    let seed = 46;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const arrivals: number[] = [];
    for (let at = 0, i = 0; i < 2000; i++, at += Math.floor(random() * 300)) arrivals.push(at);
    const commits = commitsFor(arrivals);
    expectEachOnceInTime(arrivals, commits);
  });

  it('starts the max wait over after a full batch was handed over', () => {
    const arrivals = every(100, 2000);
    const commits = commitsFor(arrivals, [450]);
    expect(commits.flatMap((c) => c.rows)).toEqual(arrivals);
    // the full batch at 450 ms, the stream's rows from 500 ms held until 1,400, the rest a quiet after the last
    expect(commits.map((c) => c.at)).toEqual([450, 1400, 1900 + quietMs]);
  });

  it('with the shortest max wait, holds no row of a stream 200 ms, and commits a burst 100 ms after its last', () => {
    const rule = commitRule(MAX_COMMIT_WAIT_MS.min);
    expect(rule).toEqual({ maxWaitMs: 200, quietMs: 100 });
    // a poll every 100 ms, each a little late (the quiet's timer never ends between two)
    const arrivals = every(99, 1000);
    const commits = commitsFor(arrivals, [], rule);
    expect(commits.flatMap((c) => c.rows)).toEqual(arrivals);
    // at the third poll each time: the oldest, 198 ms old, could not wait for another quiet
    expect(commits.map((c) => c.at)).toEqual([198, 495, 792, 891 + 100]);
  });

  it('commits nothing once stopped: the stop drains', () => {
    let commits = 0;
    const cadence = new CommitCadence(() => void commits++, RULE);
    cadence.arrived();
    cadence.stop();
    jest.advanceTimersByTime(quietMs);
    cadence.arrived();
    jest.advanceTimersByTime(10 * maxWaitMs);
    expect(commits).toBe(0);
  });
});
