/**
 * The kernel's guard of the inspectors the agent opens (bpf/inspector_guard.bpf.c): while a port
 * is held, every connect to it on a local address (any 127/8 address, 0.0.0.0, ::1, ::, their
 * IPv4-mapped forms), from any process but the agent, is refused with EPERM, in the agent's network
 * namespace (the only one the hook goes into). A port is held from before SIGUSR1 until the
 * inspector it opens is closed for good. Each refusal is counted and its pid logged.
 */
import type { Logger } from '../../../core/log/logger';
import type { GuardIntrusion, NativeAddon, NativeInspectorGuard } from '../../../core/native/addon';

interface Offender {
  rec: GuardIntrusion;
  attempts: number;
}

/** How often the kernel's records of refusals are read while a port is held. */
const DRAIN_MS = 200;

export class InspectorGuard {
  /** connects the kernel refused to ports given back since */
  private released = 0;
  private readonly holds = new Map<number, number>();
  /** the processes refused, by port, since it was guarded */
  private readonly offenders = new Map<number, Map<number, Offender>>();
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
      // the entry's own count: refusals whose record the full ring could not take count too
      this.released += this.native.unguard(port);
      this.summarize(port);
      if (this.holds.size === 0) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** Connects the kernel refused: its own counts, of the ports held now and of those given back. */
  get intrusions(): number {
    let now = 0;
    for (const port of this.holds.keys()) now += this.native.refused(port);
    return this.released + now;
  }

  /**
   * Logs each process the kernel refused the first time it is refused while the port is held
   * (how many times in all is logged when the port is given back).
   */
  drain(): void {
    const seen = this.native.drain();
    for (const rec of seen) {
      const port = this.offenders.get(rec.port) ?? new Map<number, Offender>();
      this.offenders.set(rec.port, port);
      const known = port.get(rec.pid);
      if (known) {
        known.attempts++;
        continue;
      }
      port.set(rec.pid, { rec, attempts: 1 });
      this.log.warn("refused a connection to a Node inspector kreplay opened: it is the agent's alone", {
        pid: rec.pid,
        uid: rec.uid,
        comm: rec.comm,
        port: rec.port,
      });
    }
  }

  /** The port's offenders, once more with their attempts (as recorded), as its guard is given back. */
  private summarize(port: number): void {
    for (const { rec, attempts } of this.offenders.get(port)?.values() ?? []) {
      this.log.warn('a process tried to reach a Node inspector kreplay opened', {
        pid: rec.pid,
        uid: rec.uid,
        comm: rec.comm,
        port,
        attempts,
      });
    }
    this.offenders.delete(port);
  }

  /** Drops every hold and detaches the programs. */
  close(): void {
    this.drain();
    clearInterval(this.timer);
    this.timer = undefined;
    for (const port of this.holds.keys()) {
      this.released += this.native.unguard(port);
      this.summarize(port);
    }
    this.holds.clear();
    this.native.close();
  }
}
