/**
 * The kernel's guard of the inspectors the agent opens (bpf/inspector_guard.bpf.c): while a port
 * is held, every connect to it on a local address (any 127/8 address, 0.0.0.0, ::1, ::, their
 * IPv4-mapped forms), from any process but the agent, is refused with EPERM, in the network
 * namespace it is held in: the hooked process's own (the agent's, or a container's). A port is held
 * from before SIGUSR1 until the inspector it opens is closed for good. Each refusal is counted and
 * its pid logged.
 */
import type { Logger } from '../../../core/log/logger';
import type { GuardIntrusion, NativeAddon, NativeInspectorGuard } from '../../../core/native/addon';

interface Offender {
  rec: GuardIntrusion;
  attempts: number;
}

/** How often the kernel's records of refusals are read while a port is held. */
const DRAIN_MS = 200;

/** A port in a network namespace (its cookie): what is held, and whose refusals are summed up. */
const keyOf = (port: number, netns: bigint) => `${netns}:${port}`;

interface Held {
  port: number;
  netns: bigint;
  count: number;
}

export class InspectorGuard {
  private readonly holds = new Map<string, Held>();
  /** the processes refused, by namespace and port (keyOf), since it was guarded */
  private readonly offenders = new Map<string, Map<number, Offender>>();
  private timer: NodeJS.Timeout | undefined;
  /** the kernel's count as the guard closed */
  private refusedAtClose: number | undefined;
  /** the cookie of the agent's own network namespace */
  private readonly own: bigint;

  private constructor(
    private readonly native: NativeInspectorGuard,
    private readonly log: Logger,
  ) {
    this.own = native.netnsOf(process.pid);
  }

  /** Loads and attaches the guard; throws (E_NODE_GUARD) when the kernel refuses it. */
  static open(addon: Pick<NativeAddon, 'InspectorGuard'>, log: Logger): InspectorGuard {
    return new InspectorGuard(new addon.InspectorGuard(), log);
  }

  /** The cookie of process `pid`'s network namespace, for hold(); throws E_NODE_GUARD. */
  netnsOf(pid: number): bigint {
    return this.native.netnsOf(pid);
  }

  /** A descriptor connected to 127.0.0.1:`port` in process `pid`'s network namespace; throws E_NODE_GUARD. */
  connectIn(pid: number, port: number): number {
    return this.native.connectIn(pid, port);
  }

  /**
   * Whether a socket that started listening on held `port` (in `netns`) since it was held
   * listens still; true when the kernel cannot tell. No: no inspector opened there is open, and
   * /proc/PID/net/tcp, whose every read walks the host's TCP table, need not be read.
   */
  listening(port: number, netns: bigint): boolean {
    return this.native.listening(port, netns);
  }

  /**
   * Guards `port` in the network namespace `netns` (netnsOf()'s; the agent's own by default),
   * again if held already; the function returned gives this hold back.
   */
  hold(port: number, netns: bigint = this.own): () => void {
    const key = keyOf(port, netns);
    const held = this.holds.get(key) ?? { port, netns, count: 0 };
    if (held.count === 0) this.native.guard(port, netns);
    held.count++;
    this.holds.set(key, held);
    this.timer ??= setInterval(() => this.drain(), DRAIN_MS);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.drain();
      if (--held.count > 0) return;
      this.holds.delete(key);
      this.native.unguard(port, netns);
      this.summarize(key);
      if (this.holds.size === 0) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /**
   * Connects the kernel refused, by its own count: refusals whose record the full ring could not
   * take count too.
   */
  get intrusions(): number {
    return this.refusedAtClose ?? this.native.refusedTotal();
  }

  /**
   * Logs each process the kernel refused the first time it is refused while the port is held
   * (how many times in all is logged when the port is given back).
   */
  drain(): void {
    const seen = this.native.drain();
    for (const rec of seen) {
      const key = keyOf(rec.port, rec.netns);
      const port = this.offenders.get(key) ?? new Map<number, Offender>();
      this.offenders.set(key, port);
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
  private summarize(key: string): void {
    for (const { rec, attempts } of this.offenders.get(key)?.values() ?? []) {
      this.log.warn('a process tried to reach a Node inspector kreplay opened', {
        pid: rec.pid,
        uid: rec.uid,
        comm: rec.comm,
        port: rec.port,
        attempts,
      });
    }
    this.offenders.delete(key);
  }

  /** Drops every hold and detaches the programs. */
  close(): void {
    this.drain();
    clearInterval(this.timer);
    this.timer = undefined;
    for (const [key, { port, netns }] of this.holds) {
      this.native.unguard(port, netns);
      this.summarize(key);
    }
    this.holds.clear();
    this.refusedAtClose = this.native.refusedTotal();
    this.native.close();
  }
}
