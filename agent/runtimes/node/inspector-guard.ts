/**
 * The kernel's guard of the inspectors the agent opens (bpf/inspector_guard.bpf.c): while a port
 * is held, every connect to it on a local address (any 127/8 address, 0.0.0.0, ::1, ::, their
 * IPv4-mapped forms), from any process but the agent, is refused with EPERM, in the agent's network
 * namespace (the only one the hook goes into). A port is held from before SIGUSR1 until the
 * inspector it opens is closed for good. Each refusal is counted and its pid logged.
 */
import type { Logger } from '../../../core/log/logger';
import type { GuardIntrusion, NativeAddon, NativeInspectorGuard } from '../../../core/native/addon';

/** How often the kernel's records of refusals are read while a port is held. */
const DRAIN_MS = 200;

export class InspectorGuard {
  /** connects the kernel refused */
  intrusions = 0;
  private readonly holds = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly native: NativeInspectorGuard,
    private readonly log: Logger,
  ) {}

  /** Loads and attaches the guard; throws (E_NODE_GUARD) when the kernel refuses it. */
  static open(addon: Pick<NativeAddon, 'InspectorGuard'>, log: Logger): InspectorGuard {
    return new InspectorGuard(new addon.InspectorGuard(), log);
  }

  /** Guards `port` (again, if held already); the function returned gives this hold back. */
  hold(port: number): () => void {
    const held = this.holds.get(port) ?? 0;
    if (held === 0) this.native.guard(port);
    this.holds.set(port, held + 1);
    this.timer ??= setInterval(() => this.drain(), DRAIN_MS);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.drain();
      const left = (this.holds.get(port) ?? 1) - 1;
      if (left > 0) {
        this.holds.set(port, left);
        return;
      }
      this.holds.delete(port);
      this.native.unguard(port);
      if (this.holds.size === 0) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** Counts and logs the refusals the kernel recorded: one line per process and port. */
  drain(): void {
    const seen = this.native.drain();
    if (seen.length === 0) return;
    this.intrusions += seen.length;
    const by = new Map<string, { first: GuardIntrusion; attempts: number }>();
    for (const rec of seen) {
      const key = `${rec.pid}:${rec.port}`;
      const known = by.get(key);
      if (known) known.attempts++;
      else by.set(key, { first: rec, attempts: 1 });
    }
    for (const { first, attempts } of by.values())
      this.log.warn("refused a connection to a Node inspector kreplay opened: it is the agent's alone", {
        pid: first.pid,
        uid: first.uid,
        comm: first.comm,
        port: first.port,
        attempts,
      });
  }

  /** Drops every hold and detaches the programs. */
  close(): void {
    this.drain();
    clearInterval(this.timer);
    this.timer = undefined;
    this.holds.clear();
    this.native.close();
  }
}
