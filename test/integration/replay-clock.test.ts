import { readdirSync, readFileSync } from 'node:fs';
import { CAP_SYS_NICE, effectiveCapabilities, holdsCapability } from '../support/capture-support';
import { silentLogger } from '../../core/log/logger';
import { HighResClock } from '../../daemon/replay/clock/high-res-clock';

const SCHED_FIFO = 1;

/** Scheduling policy of each thread of this process (field 41 of /proc/self/task/<tid>/stat). */
function threadPolicies(): number[] {
  return readdirSync('/proc/self/task').map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    // fields after the command name, which is in parentheses and may hold spaces
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[41 - 3]);
  });
}

function mayUseRealtime(): boolean {
  return holdsCapability(effectiveCapabilities(), CAP_SYS_NICE);
}

describe('the high-resolution replay clock', () => {
  let clock: HighResClock;

  beforeEach(async () => {
    clock = new HighResClock(silentLogger);
    await clock.ready();
  });
  afterEach(() => clock.close());

  it("releases each lane's deadlines in order, never before they are due", async () => {
    const lanes = [clock.lane(), clock.lane()];
    const start = clock.now() + 5_000_000n;
    const released: { lane: number; deadline: bigint; at: bigint; seen: bigint }[] = [];
    const done = new Promise<void>((resolve) => {
      for (let i = 0; i < 40; i++) {
        const lane = i % 2;
        const deadline = start + BigInt(i) * 300_000n;
        lanes[lane]!.at(deadline, (at) => {
          released.push({ lane, deadline, at, seen: clock.now() });
          if (released.length === 40) resolve();
        });
      }
    });
    await done;
    // each lane in its own order; lanes are independent sessions, released in one pass when due together
    for (const lane of [0, 1]) {
      const deadlines = released.filter((r) => r.lane === lane).map((r) => r.deadline);
      expect(deadlines).toHaveLength(20);
      expect(deadlines).toEqual([...deadlines].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    }
    for (const r of released) {
      expect(r.at).toBeGreaterThanOrEqual(r.deadline);
      expect(r.seen).toBeGreaterThanOrEqual(r.at);
    }
  });

  it('forgets the deadlines of a cleared lane, and the lane works again afterwards', async () => {
    const lane = clock.lane();
    const forgotten: bigint[] = [];
    lane.at(clock.now() + 20_000_000n, (at) => forgotten.push(at));
    lane.clear();
    const later = await new Promise<bigint>((resolve) => lane.at(clock.now() + 40_000_000n, resolve));
    expect(later).toBeGreaterThan(0n);
    expect(forgotten).toEqual([]);
  });

  it('hands the releases it made before a clear to the clearer instead of running them', () => {
    const lane = clock.lane();
    const ran: bigint[] = [];
    const due = clock.now();
    // with a frame, so the lane holds a ring and clear() waits for the thread to look
    lane.at(due, (at) => ran.push(at), { index: 0, head: 'data: late=', tail: '\n\n' });
    // without letting the event loop turn (it would run the release): settle until the thread reported it
    const reported = lane as unknown as { reported: { length: number } };
    const giveUp = Date.now() + 5000;
    while (reported.reported.length === 0 && Date.now() < giveUp) clock.settle();
    expect(reported.reported.length).toBe(1);
    const seen = lane.clear();
    expect(seen).toHaveLength(1);
    expect(seen[0]!.releasedAt).toBeGreaterThanOrEqual(due);
    expect(ran).toEqual([]);
    seen[0]!.release(seen[0]!.releasedAt, seen[0]!.writtenAt);
    expect(ran).toEqual([seen[0]!.releasedAt]);
    // nothing is left to run later, nor handed over twice
    expect(lane.clear()).toEqual([]);
  });

  it('runs under SCHED_FIFO when the process may (CAP_SYS_NICE)', () => {
    if (!mayUseRealtime()) {
      console.warn('SKIPPED: no CAP_SYS_NICE here, so the replay clock stays under SCHED_OTHER');
      expect(clock.scheduling).toMatch(/^SCHED_OTHER/);
      return;
    }
    expect(clock.scheduling).toBe('SCHED_FIFO 10');
    expect(threadPolicies().filter((policy) => policy === SCHED_FIFO)).toHaveLength(1);
  });

  it('waits for a distant deadline almost without CPU', async () => {
    const lane = clock.lane();
    const waitNs = 1_000_000_000n;
    const cpu = process.cpuUsage();
    const started = clock.now();
    const at = await new Promise<bigint>((resolve) => lane.at(started + waitNs, resolve));
    const used = process.cpuUsage(cpu);
    const cpuNs = BigInt(used.user + used.system) * 1000n;
    expect(at).toBeGreaterThanOrEqual(started + waitNs);
    // the clock thread spins only the last few hundred µs: far below a tenth of the wait on this process's clock
    expect(cpuNs * 10n).toBeLessThan(waitNs);
  });
});
