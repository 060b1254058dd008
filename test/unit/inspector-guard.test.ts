/**
 * The agent's side of the inspector guard (agent/runtimes/node/inspector-guard.ts) over a stand-in
 * for the kernel's map and records: ports held and given back, each refusal counted once, each
 * process refused logged once per hold. The kernel side is attacked in node-hook-door.test.ts.
 */
import type { GuardIntrusion, NativeInspectorGuard } from '../../core/native/addon';
import { InspectorGuard } from '../../agent/runtimes/node/inspector-guard';
import { recordingLogger } from '../support/recording-logger';

/** The kernel's set of guarded ports, its count of refusals and its ring of records, the ring holding `ringRoom` at most. */
class FakeKernel implements NativeInspectorGuard {
  readonly guarded = new Set<number>();
  total = 0;
  ring: GuardIntrusion[] = [];
  closed = false;
  constructor(private readonly ringRoom = Infinity) {}
  guard(port: number): void {
    this.guarded.add(port);
  }
  refusedTotal(): number {
    if (this.closed) throw new Error('the inspector guard is closed');
    return this.total;
  }
  /** the door's watch asks; this guard's tests do not */
  listening(): boolean {
    return true;
  }
  unguard(port: number): void {
    this.guarded.delete(port);
  }
  drain(): GuardIntrusion[] {
    const out = this.ring;
    this.ring = [];
    return out;
  }
  close(): void {
    this.closed = true;
  }
  /** one network namespace: the agent's */
  netnsOf(): bigint {
    return 0n;
  }
  connectIn(): number {
    return -1;
  }
  /** a connect from `pid` to `port`: refused (counted, recorded if the ring has room) when guarded */
  attempt(pid: number, port: number): boolean {
    if (!this.guarded.has(port)) return true;
    this.total++;
    if (this.ring.length < this.ringRoom)
      this.ring.push({ pid, uid: 65534, port, netns: 0n, family: 4, comm: 'python3' });
    return false;
  }
}

function guardOver(kernel: FakeKernel): { guard: InspectorGuard; lines: string[] } {
  const lines: string[] = [];
  const log = recordingLogger((level, msg, f) => lines.push(`${level} ${msg} ${JSON.stringify(f)}`));
  const guard = InspectorGuard.open(
    {
      InspectorGuard: function () {
        return kernel;
      } as unknown as new () => NativeInspectorGuard,
    },
    log,
  );
  return { guard, lines };
}

describe('InspectorGuard', () => {
  it('guards a port from the first hold to the last release', () => {
    const kernel = new FakeKernel();
    const { guard } = guardOver(kernel);
    const first = guard.hold(9229);
    const second = guard.hold(9229);
    expect(kernel.attempt(1, 9229)).toBe(false);
    first();
    first(); // a release counts once
    expect(kernel.attempt(1, 9229)).toBe(false);
    second();
    expect(kernel.attempt(1, 9229)).toBe(true);
    guard.close();
    expect(kernel.closed).toBe(true);
  });

  it('counts every refusal once and logs each process once per hold, then its attempts', () => {
    const kernel = new FakeKernel();
    const { guard, lines } = guardOver(kernel);
    const release = guard.hold(9229);
    for (let i = 0; i < 5; i++) kernel.attempt(4242, 9229);
    kernel.attempt(4343, 9229);
    guard.drain();
    kernel.attempt(4242, 9229);
    guard.drain();
    expect(guard.intrusions).toBe(7);
    release();
    expect(guard.intrusions).toBe(7);
    expect(lines).toEqual([
      `warn refused a connection to a Node inspector kreplay opened: it is the agent's alone {"pid":4242,"uid":65534,"comm":"python3","port":9229}`,
      `warn refused a connection to a Node inspector kreplay opened: it is the agent's alone {"pid":4343,"uid":65534,"comm":"python3","port":9229}`,
      `warn a process tried to reach a Node inspector kreplay opened {"pid":4242,"uid":65534,"comm":"python3","port":9229,"attempts":6}`,
      `warn a process tried to reach a Node inspector kreplay opened {"pid":4343,"uid":65534,"comm":"python3","port":9229,"attempts":1}`,
    ]);
  });

  it("counts the refusals whose records the kernel's ring had no room for, from the kernel's own count, closed or not", () => {
    const kernel = new FakeKernel(2);
    const { guard } = guardOver(kernel);
    const release = guard.hold(9229);
    for (let i = 0; i < 10; i++) kernel.attempt(4242, 9229);
    guard.drain();
    expect(guard.intrusions).toBe(10);
    release();
    expect(guard.intrusions).toBe(10);
    guard.close();
    expect(guard.intrusions).toBe(10);
  });
});
