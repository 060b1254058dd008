/**
 * Queues the Python hook (kreplay_python_hook.py) into the CPython processes the capture includes:
 * those running when the agent starts and those that start later, found by a scan of /proc every
 * SCAN_MS. One process at a time, each once: a process that has the hook (from an earlier agent)
 * answers a second queuing by having its threads signal their units anew. Never into kreplay's own
 * processes, nor one that opted out (KREPLAY_PYTHON_HOOK=off in its environment). A process the hook
 * cannot reach keeps its events unattributed where its runtime interleaves requests: each such
 * process is logged once, with why, and counted: refused (nothing was sent: opted out, an
 * interpreter the hook does not know, ptrace not allowed) or failed (a step in the process failed,
 * or its main thread had no safe point).
 */
import { closeSync, openSync, readdirSync, readFileSync, readlinkSync, readSync } from 'node:fs';
import { isErrorCode, type ErrorCode } from '../../../core/error-codes';
import type { Logger } from '../../../core/log/logger';
import { nativeAddon, type NativeAddon, type NativePythonSymbols } from '../../../core/native/addon';
import { AGENT_ANCESTOR_REASON, ancestorsOf, parseStat, readStat } from '../process-tree';
import { pythonBootstrap, readPythonHookSource } from './hook-source';
import {
  interpreterState,
  isKreplayCommand,
  needsMaps,
  optedOut,
  pythonVersion,
  RUNTIME_BYTES,
  runtimeLayout,
  tracerPid,
  type RuntimeLayout,
} from './python-process';

export interface PythonHookCounts {
  /** the hook is queued: it runs at the interpreter's next pending-call check */
  hooked: number;
  refused: number;
  failed: number;
}

/** How often /proc is scanned for Python processes that started since. */
export const SCAN_MS = 500;
/** The deadline of one queuing: reaching a system call of the main thread and the call itself. */
const QUEUE_TIMEOUT_MS = 2000;
/** Scans a process is retried across while its interpreter starts up or it has no safe point. */
const MAX_ATTEMPTS = 20;

export interface PythonHookOptions {
  /** whether the capture filters include the process */
  wanted(pid: number): boolean;
  log: Logger;
  native?: Pick<NativeAddon, 'pythonSymbols' | 'queuePythonCode'>;
  /** the processes above the agent, never hooked (default: read from /proc at each scan) */
  ancestors?: () => number[];
}

interface Candidate {
  pid: number;
  exe: string;
  layout: RuntimeLayout;
}

/**
 * What to do with a process after a look: nothing more; look again (its interpreter is starting, or
 * it had no safe point), up to MAX_ATTEMPTS; or look again while it is young (not a Python the
 * capture includes yet: a shell may exec python, a process may be moved into an included cgroup),
 * for YOUNG_SCANS scans.
 */
type Verdict = 'done' | 'retry' | 'young';
const YOUNG_SCANS = 6;

interface Seen {
  verdict: Verdict;
  looks: number;
}

export class PythonHooks {
  readonly counts: PythonHookCounts = { hooked: 0, refused: 0, failed: 0 };
  /** by pid: processes looked at; dropped when their pid leaves /proc */
  private readonly seen = new Map<number, Seen>();
  private readonly bootstrap = pythonBootstrap(readPythonHookSource());
  private readonly native: Pick<NativeAddon, 'pythonSymbols' | 'queuePythonCode'>;
  private timer: NodeJS.Timeout | null = null;
  private scanning: Promise<void> | null = null;
  private stopped = false;
  /** the agent's ancestors at the last scan */
  private agentLine = new Set<number>();

  constructor(private readonly options: PythonHookOptions) {
    this.native = options.native ?? nativeAddon();
  }

  start(): void {
    this.scanNow();
    this.timer = setInterval(() => this.scanNow(), SCAN_MS);
  }

  /** Stops scanning; waits for a queuing under way (it has its deadline). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.scanning;
  }

  private scanNow(): void {
    if (this.scanning || this.stopped) return;
    this.scanning = this.scanOnce()
      .catch((err: unknown) => this.options.log.warn(`python hook scan failed: ${(err as Error).message}`))
      .finally(() => (this.scanning = null));
  }

  /** One look at /proc: what start() does every SCAN_MS. */
  async scanOnce(): Promise<void> {
    this.agentLine = new Set((this.options.ancestors ?? (() => ancestorsOf(process.pid)))());
    const pids = new Set(
      readdirSync('/proc')
        .filter((name) => /^\d+$/.test(name))
        .map(Number),
    );
    for (const pid of this.seen.keys()) if (!pids.has(pid)) this.seen.delete(pid);
    for (const pid of pids) {
      if (this.stopped) return;
      const seen = this.seen.get(pid);
      if (seen?.verdict === 'done') continue;
      const looks = (seen?.looks ?? 0) + 1;
      let verdict = await this.consider(pid);
      if (verdict === 'retry' && looks >= MAX_ATTEMPTS) {
        this.finish(pid, 'failed', `its main thread had no safe point in ${looks} tries`);
        verdict = 'done';
      }
      if (verdict === 'young' && looks >= YOUNG_SCANS) verdict = 'done';
      this.seen.set(pid, { verdict, looks });
    }
  }

  /** Looks at one process, and queues the hook when it should. */
  private async consider(pid: number): Promise<Verdict> {
    const candidate = this.candidate(pid);
    if (candidate === 'young' || candidate === 'done') return candidate;
    let symbols: NativePythonSymbols;
    try {
      symbols = this.native.pythonSymbols(pid);
    } catch (err) {
      return this.failed(candidate, err);
    }
    if (!symbols.runtime) {
      this.finish(pid, 'refused', `${symbols.file} exports no _PyRuntime`, candidate.exe);
      return 'done';
    }
    const state = interpreterState(candidate.layout, readMemory(pid, symbols.runtime, RUNTIME_BYTES));
    if (state === 'starting') return 'retry';
    if (state === 'finalizing') return 'done';
    if (state === 'unknown') {
      this.finish(pid, 'refused', `${symbols.file}: _PyRuntime is not laid out as expected`, candidate.exe);
      return 'done';
    }
    try {
      const queued = await this.native.queuePythonCode(pid, symbols, this.bootstrap, QUEUE_TIMEOUT_MS);
      // -1: the interpreter's pending calls are full for now
      if (queued !== 0) return 'retry';
    } catch (err) {
      return this.failed(candidate, err);
    }
    this.finish(
      pid,
      'hooked',
      "queued the Python hook (it runs at the interpreter's next check)",
      candidate.exe,
    );
    return 'done';
  }

  /** The process when it runs a CPython the hook knows, the capture includes it, and it is not kreplay's. */
  private candidate(pid: number): Candidate | 'young' | 'done' {
    if (pid === process.pid) return 'done';
    // a kernel thread has no exe
    const exe = readText(() => readlinkSync(`/proc/${pid}/exe`));
    if (exe === null) return 'done';
    const maps = needsMaps(exe) ? (readText(() => readFileSync(`/proc/${pid}/maps`, 'utf8')) ?? '') : '';
    const version = pythonVersion(exe, maps);
    if (!version) return 'young';
    if (!this.options.wanted(pid)) return 'young';
    if (this.isKreplays(pid)) return 'done';
    if (this.agentLine.has(pid)) {
      this.finish(pid, 'refused', AGENT_ANCESTOR_REASON, exe);
      return 'done';
    }
    const layout = runtimeLayout(version);
    if (!layout) {
      this.finish(
        pid,
        'refused',
        `python${version.major}.${version.minor}: the hook knows CPython 3.11 to 3.13`,
        exe,
      );
      return 'done';
    }
    if (optedOut(readText(() => readFileSync(`/proc/${pid}/environ`, 'latin1')) ?? '')) {
      this.finish(pid, 'refused', 'KREPLAY_PYTHON_HOOK=off in its environment', exe);
      return 'done';
    }
    const tracer = tracerPid(readText(() => readFileSync(`/proc/${pid}/status`, 'utf8')) ?? '');
    if (tracer !== 0) {
      this.finish(pid, 'refused', `already traced by process ${tracer}`, exe);
      return 'done';
    }
    return { pid, exe, layout };
  }

  /** The process or one of its ancestors runs kreplay (`kreplay run`, `replay --exec`, the agent). */
  private isKreplays(pid: number): boolean {
    for (let at = pid, hops = 0; at > 1 && hops < 64; hops++) {
      if (isKreplayCommand(readText(() => readFileSync(`/proc/${at}/cmdline`, 'latin1')) ?? '')) return true;
      const stat = parseStat(readStat(at) ?? '');
      if (!stat) return false;
      at = stat.ppid;
    }
    return false;
  }

  /** A refused or failed step: whether it is worth another try. */
  private failed(candidate: Candidate, err: unknown): Verdict {
    const code: ErrorCode | undefined = isErrorCode((err as { code?: unknown }).code)
      ? (err as { code: ErrorCode }).code
      : undefined;
    const message = (err as Error).message;
    switch (code) {
      case 'E_PY_INJECT_GONE':
        return 'done';
      case 'E_PY_INJECT_TIMEOUT':
      case 'E_PY_INJECT_STATE':
        return 'retry';
      case 'E_PY_INJECT_PERM':
        this.finish(candidate.pid, 'refused', message, candidate.exe);
        return 'done';
      case 'E_PY_INJECT_SYMBOLS':
        this.finish(candidate.pid, 'refused', message, candidate.exe);
        return 'done';
      default:
        this.finish(candidate.pid, 'failed', message, candidate.exe);
        return 'done';
    }
  }

  /** Counts the outcome, and says it once (each process ends here once). */
  private finish(pid: number, outcome: keyof PythonHookCounts, why: string, exe?: string): void {
    this.counts[outcome]++;
    const fields = { pid, exe, outcome };
    if (outcome === 'hooked') this.options.log.info(why, fields);
    else if (outcome === 'refused')
      this.options.log.info(`no Python hook: ${why}; its requests stay unattributed`, fields);
    else this.options.log.warn(`no Python hook: ${why}; its requests stay unattributed`, fields);
  }
}

function readText<T>(read: () => T): T | null {
  try {
    return read();
  } catch {
    return null;
  }
}

/** `length` bytes of process `pid`'s memory at `address`; zeros where it cannot be read. */
function readMemory(pid: number, address: bigint, length: number): Buffer {
  const bytes = Buffer.alloc(length);
  let fd = -1;
  try {
    fd = openSync(`/proc/${pid}/mem`, 'r');
    readSync(fd, bytes, 0, length, address);
  } catch {
    // gone, or not readable: zeros read as an interpreter still starting
  } finally {
    if (fd >= 0) closeSync(fd);
  }
  return bytes;
}
