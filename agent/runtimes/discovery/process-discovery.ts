/**
 * The one process discovery of the runtime hooks: at each tick, looks at the processes the kernel
 * said started, exec'd or exited (`changes`) and those it follows that are due a look, and walks
 * /proc only at one tick in SAFETY_WALK_SCANS or when the kernel's news was lost; without that news,
 * walks /proc when a process may have started (the kernel's last pid moved) or one it follows is due
 * a look, and all of it at one tick in EXEC_CHECK_SCANS. Tells which runtime each process runs
 * (classify.ts), applies the hooks' scope and the agent's own line once, and
 * hands each process to its runtime's injector, one at a time (an injection waits on the process;
 * Node's inspector port is shared). Each process ends in one outcome, counted and logged once
 * (runtime-hook.ts); a process that exec'd is another program and is looked at anew.
 */
import { readdirSync, readlinkSync } from 'node:fs';
import type { Logger } from '../../../core/log/logger';
import {
  AGENT_ANCESTOR_REASON,
  ancestorsOf,
  exeIdentity,
  handedOut,
  lastPid,
  procInOwnNamespace,
} from '../process-tree';
import {
  RUNTIME_LABELS,
  zeroHookCounts,
  type Classification,
  type FinalResult,
  type FoundProcess,
  type HookOutcome,
  type RuntimeHookCounts,
  type RuntimeInjector,
  type RuntimeInjectors,
} from './runtime-hook';

/** Between scans of /proc. */
export const SCAN_MS = 500;
/**
 * One scan in this many walks all of /proc whatever moved, and asks each settled process (no
 * runtime found, or its outcome counted) and each not due a look whether it exec'd (a stat each):
 * the other scans walk /proc only when a process may have started, and a host whose processes do
 * not change costs a read of /proc/loadavg a scan. A program exec'd by a process this old is found
 * within 5 s; a process that starts, at the next scan, as before.
 */
const EXEC_CHECK_SCANS = 10;
/**
 * With the kernel's news of processes, one scan in this many walks /proc whatever it said (a safety
 * net: the news is exact unless lost, and a loss is said and walked at once).
 */
const SAFETY_WALK_SCANS = 60;
/**
 * Scans a process that runs none of the runtimes is looked at again: a shell may exec python just
 * after its fork, and an embedding program (uwsgi) maps libpython after it started.
 */
const YOUNG_SCANS = 6;
/**
 * A process the scope left out is looked at again at each of its first LEFT_OUT_SCANS scans (a
 * server binds its port once it has started), then once every LEFT_OUT_EVERY scans (a scope that
 * changes later, a cgroup or a late listener: within 5 s).
 */
const LEFT_OUT_SCANS = 20;
const LEFT_OUT_EVERY = 10;
/** Looks in a row a process is in scope before its injector is handed it. */
const SETTLE_SCANS = 2;
/** A process that waits on another program (`wait`) is asked again after this, doubled each time up to the most. */
const WAIT_MS = 1000;
const WAIT_MAX_MS = 30_000;

export interface DiscoveryOptions {
  injectors: RuntimeInjectors;
  classifier: { classify(pid: number, exeId: string): Classification | null };
  /** why the hooks leave this process out now (capture filters, hook selectors, serving), or null */
  scope(pid: number): string | null;
  log: Logger;
  scanMs?: number;
  /** tells the kernel a process is a JVM, whose new threads inherit no request (bpf/capture/tasks.h) */
  markJvm?(pid: number): void;
  /** the processes above the agent, never hooked (default: read from /proc at each scan) */
  ancestors?: () => number[];
  /** a process's executable's identity, null for a kernel thread or a process gone (default: process-tree's, a stat) */
  exeIdentity?: (pid: number) => string | null;
  /**
   * the last pid the kernel handed out, null when unknown (then every scan walks /proc); default:
   * process-tree's, when /proc shows the agent's own pid namespace
   */
  lastPid?: () => number | null;
  /**
   * the processes that started, exec'd or exited since the last call, as the kernel said
   * (bpf/capture/tasks.h); null when some of that was lost (then the scan walks /proc); undefined
   * when it cannot be known (then every scan is as without the option)
   */
  changes?: () => number[] | null | undefined;
}

interface Tracked {
  /** its executable: an exec makes it another program ('' for a kernel thread) */
  exeId: string;
  classification: Classification | null;
  /** scans it was looked at without a runtime found */
  looks: number;
  /** scans its injector answered `retry` */
  tries: number;
  /** counted in its final outcome, or runs no runtime */
  settled: boolean;
  /** scans the scope left it out (counted out_of_scope at the first) */
  leftOut: number;
  /** left out long: not looked at before this scan */
  nextLook?: number;
  /** looks in a row it was in scope */
  inScope: number;
  /** it waits on another program: not handed to its injector before this (performance.now()), and the next wait */
  retryAt?: number;
  retryMs?: number;
}

export class ProcessDiscovery {
  readonly counts: RuntimeHookCounts = zeroHookCounts();
  private readonly tracked = new Map<number, Tracked>();
  private timer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> = Promise.resolve();
  private stopped = false;
  private scans = 0;
  /** the processes first seen at the last walk, not looked at yet */
  private firstSeen = new Set<number>();
  private readonly lastPid: () => number | null;
  /** the kernel's last pid before the last walk of /proc (or, by the kernel's news, the last scan) */
  private walkedAt: number | null = null;
  private walked = false;

  constructor(private readonly options: DiscoveryOptions) {
    const own = options.lastPid === undefined && procInOwnNamespace();
    this.lastPid = options.lastPid ?? (own ? () => lastPid() : () => null);
  }

  start(): void {
    for (const injector of this.injectors()) injector.start?.();
    this.schedule(0);
  }

  /** No new injection starts; resolves once the one under way (if any) has finished, then the injectors stopped. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.scanning;
    await Promise.all(this.injectors().map((injector) => injector.stop?.()));
  }

  private injectors(): RuntimeInjector[] {
    return Object.values(this.options.injectors) as RuntimeInjector[];
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.scanning = this.scanOnce()
        .catch((err: unknown) =>
          this.options.log.warn('the runtime process scan failed', { error: String(err) }),
        )
        .finally(() => this.schedule(this.options.scanMs ?? SCAN_MS));
    }, ms);
  }

  /** One scan: what start() does every scanMs. */
  async scanOnce(): Promise<void> {
    this.scans++;
    // read before the kernel's news: a pid handed out before this read whose process's news is lost
    // was already reused, and the exit that freed it is in the news taken here or before
    const last = this.lastPid();
    const changes = this.options.changes?.();
    const since = this.walkedAt;
    const now = performance.now();
    if (changes) return this.lookAtChanged(changes, last, now);
    const all = changes === null || this.scans % EXEC_CHECK_SCANS === 0;
    if (!all && last !== null && last === since && !this.anyDue(now)) return;
    await this.walk(all, since, last, now);
  }

  /**
   * A scan by the kernel's news: what it names is looked at anew from the next scan (another process,
   * or another program), with the processes first seen at the last scan and those due a look; /proc
   * is walked at one scan in SAFETY_WALK_SCANS.
   */
  private async lookAtChanged(changes: number[], last: number | null, now: number): Promise<void> {
    const named = new Set(changes);
    named.delete(process.pid);
    for (const pid of named) this.tracked.delete(pid);
    // the first scan finds the processes started before the agent
    if (!this.walked || this.scans % SAFETY_WALK_SCANS === 0) {
      await this.walk(true, this.walkedAt, last, now);
      for (const pid of named) this.firstSeen.add(pid);
      return;
    }
    this.walkedAt = last;
    const look = [...this.firstSeen].filter((pid) => !named.has(pid));
    for (const [pid, tracked] of this.tracked) if (this.due(tracked, now)) look.push(pid);
    for (const pid of look) {
      if (this.stopped) return;
      await this.look(pid, false, now, named, true);
    }
    this.firstSeen = named;
  }

  /** A walk of /proc: `all` asks every process whether it exec'd. */
  private async walk(all: boolean, since: number | null, last: number | null, now: number): Promise<void> {
    this.walked = true;
    this.walkedAt = last;
    const alive = new Set<number>();
    const firstSeen = new Set<number>();
    for (const name of readdirSync('/proc')) {
      if (this.stopped) return;
      if (!/^\d+$/.test(name)) continue;
      const pid = Number(name);
      if (pid === process.pid) continue;
      alive.add(pid);
      // its pid was handed out since the last walk: another process than the one tracked (gone)
      if (this.tracked.has(pid) && since !== null && last !== null && handedOut(pid, since, last))
        this.tracked.delete(pid);
      await this.look(pid, all, now, firstSeen, false);
    }
    this.firstSeen = firstSeen;
    for (const pid of this.tracked.keys()) if (!alive.has(pid)) this.tracked.delete(pid);
  }

  /**
   * One process at a scan; `firstSeen` collects those seen for the first time. `unlisted`: looked at
   * by the kernel's news, not listed by a walk of /proc (a pid gone is forgotten).
   */
  private async look(
    pid: number,
    all: boolean,
    now: number,
    firstSeen: Set<number>,
    unlisted: boolean,
  ): Promise<void> {
    let tracked = this.tracked.get(pid);
    // looked at from its second scan: on a busy host most processes are gone by then (a build's,
    // a shell loop's), and none is hooked before two looks in scope anyway
    if (!tracked && !this.firstSeen.has(pid)) {
      firstSeen.add(pid);
      return;
    }
    if (tracked && !all && !this.due(tracked, now)) return;
    // '': a kernel thread (no executable), settled at once; or, unlisted, a process gone
    const exeId = (this.options.exeIdentity ?? exeIdentity)(pid) ?? '';
    if (unlisted && exeId === '') {
      this.tracked.delete(pid);
      return;
    }
    if (!tracked || tracked.exeId !== exeId) {
      const settled = exeId === '';
      tracked = { exeId, classification: null, looks: 0, tries: 0, settled, leftOut: 0, inScope: 0 };
      this.tracked.set(pid, tracked);
    }
    if (tracked.settled) return;
    if (!tracked.classification) {
      tracked.classification = this.options.classifier.classify(pid, exeId);
      // hooked or not, in scope or not: the kernel cannot see a JVM's hand-offs between threads
      if (tracked.classification?.runtime === 'jvm') this.options.markJvm?.(pid);
    }
    if (!tracked.classification) {
      if (++tracked.looks >= YOUNG_SCANS) tracked.settled = true;
      return;
    }
    await this.consider(pid, tracked, tracked.classification);
  }

  /** Whether a process is due a look at this scan (one not due is asked only whether it exec'd, at the full walks). */
  private due(tracked: Tracked, now: number): boolean {
    return !tracked.settled && (tracked.nextLook ?? 0) <= this.scans && (tracked.retryAt ?? 0) <= now;
  }

  private anyDue(now: number): boolean {
    if (this.firstSeen.size > 0) return true;
    for (const tracked of this.tracked.values()) if (this.due(tracked, now)) return true;
    return false;
  }

  private async consider(pid: number, tracked: Tracked, classification: Classification): Promise<void> {
    if (!this.due(tracked, performance.now())) return;
    const found: FoundProcess = { pid, exe: readExe(pid), classification };
    const outOfScope = this.options.scope(pid);
    if (outOfScope !== null) {
      if (tracked.leftOut === 0) this.report(found, 'out_of_scope', outOfScope);
      if (++tracked.leftOut > LEFT_OUT_SCANS) tracked.nextLook = this.scans + LEFT_OUT_EVERY;
      tracked.inScope = 0;
      return;
    }
    // in scope at two looks in a row before its injector gets it: a server that just bound its port
    // (its workers with it) is left a scan to settle; signalled in the middle of its start-up (a
    // cluster's primary handing its workers their listener), Node opened its inspector a second
    // time, and kept port 9229
    if (++tracked.inScope < SETTLE_SCANS) return;
    // read when a process is about to be handed its injector, not at each scan
    const agentLine = (this.options.ancestors ?? (() => ancestorsOf(process.pid)))();
    if (agentLine.includes(pid)) return this.settle(tracked, found, 'refused', AGENT_ANCESTOR_REASON);
    const injector = this.options.injectors[classification.runtime] as RuntimeInjector;
    const final = (r: FinalResult): void =>
      this.settle(tracked, found, r.outcome, r.outcome === 'hooked' ? injector.hookedMessage : r.reason);
    const result = await injector.inject(found, final);
    switch (result.outcome) {
      // gone: nothing to count; pending: counted when the injector calls `final`
      case 'gone':
      case 'pending':
        tracked.settled = true;
        return;
      case 'wait':
        return this.wait(tracked, found, result.reason);
      case 'retry':
        if (++tracked.tries >= injector.maxTries) final(result.then);
        return;
      default:
        return final(result);
    }
  }

  private settle(tracked: Tracked, found: FoundProcess, outcome: HookOutcome, why: string): void {
    tracked.settled = true;
    this.report(found, outcome, why);
  }

  /** Asked again with backoff for as long as it runs, never given up nor counted; said once. */
  private wait(tracked: Tracked, { pid, exe, classification }: FoundProcess, reason: string): void {
    const { runtime } = classification;
    if (tracked.retryMs === undefined)
      this.options.log.info(
        `a ${RUNTIME_LABELS[runtime]} process waits for ${reason}; asked again with backoff for as long as it runs`,
        { pid, exe, runtime },
      );
    tracked.retryMs = Math.min((tracked.retryMs ?? WAIT_MS / 2) * 2, WAIT_MAX_MS);
    tracked.retryAt = performance.now() + tracked.retryMs;
  }

  /** Counts the outcome and says it, once per process. */
  private report({ pid, exe, classification }: FoundProcess, outcome: HookOutcome, why: string): void {
    const { runtime } = classification;
    this.counts[runtime][outcome]++;
    const label = RUNTIME_LABELS[runtime];
    const fields = { pid, exe, runtime, outcome };
    const log = this.options.log;
    switch (outcome) {
      case 'hooked':
        return log.info(why, fields);
      case 'refused':
        return log.info(`left a ${label} process unattributed: ${why}`, fields);
      case 'failed':
        return log.warn(`could not hook a ${label} process: ${why}; it stays unattributed`, fields);
      case 'out_of_scope':
        return log.info(`left a ${label} process unhooked for now: ${why}`, fields);
      case 'no_hook':
        return log.info(`no ${label} hook: ${why}`, fields);
    }
  }
}

function readExe(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return '';
  }
}
