/**
 * The Python injector of the process discovery (agent/runtimes/discovery): queues the Python hook
 * (kreplay_python_hook.py) into each CPython process it is handed, once: a process that has the hook
 * (from an earlier agent) answers a second queuing by having its threads signal their units anew.
 * Never into kreplay's own processes, nor one that opted out (KREPLAY_PYTHON_HOOK=off in its
 * environment). A process the hook cannot reach keeps its events unattributed where its runtime
 * interleaves requests: refused (nothing was sent: opted out, an interpreter the hook does not know,
 * ptrace not allowed) or failed (a step in the process failed, or its main thread had no safe point).
 */
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { isErrorCode, type ErrorCode } from '../../../core/error-codes';
import { nativeAddon, type NativeAddon, type NativePythonSymbols } from '../../../core/native/addon';
import type { FoundProcess, InjectResult, RuntimeInjector } from '../discovery/runtime-hook';
import { parseSeccomp } from '../node/node-process';
import { parseStat, readStat } from '../process-tree';
import { pythonBootstrap, readPythonHookSource } from './hook-source';
import {
  interpreterState,
  isKreplayCommand,
  optedOut,
  RUNTIME_BYTES,
  runtimeLayout,
  tracerPid,
  type PythonVersion,
  type RuntimeLayout,
} from './python-process';

/** The deadline of one queuing: reaching a system call of the main thread and the call itself. */
const QUEUE_TIMEOUT_MS = 2000;
/** Scans a process is asked again across while its interpreter starts up or it has no safe point. */
const MAX_ATTEMPTS = 20;

type PythonProcess = FoundProcess<{ runtime: 'python'; version: PythonVersion }>;

const NO_SAFE_POINT = {
  outcome: 'retry',
  then: { outcome: 'failed', reason: `its main thread had no safe point in ${MAX_ATTEMPTS} tries` },
} as const;

export class PythonHookInjector implements RuntimeInjector<PythonProcess['classification']> {
  readonly maxTries = MAX_ATTEMPTS;
  readonly hookedMessage = "queued the Python hook (it runs at the interpreter's next check)";
  private readonly source = readPythonHookSource();
  /** by whether the process is under a seccomp filter: then the hook signals with writes only */
  private readonly bootstraps = {
    filtered: pythonBootstrap(this.source, false),
    free: pythonBootstrap(this.source),
  };
  private readonly native: Pick<NativeAddon, 'pythonSymbols' | 'queuePythonCode'>;

  constructor(native?: Pick<NativeAddon, 'pythonSymbols' | 'queuePythonCode'>) {
    this.native = native ?? nativeAddon();
  }

  /** Looks at one process, and queues the hook when it should. */
  async inject({ pid, classification }: PythonProcess): Promise<InjectResult> {
    const refusal = refusalOf(pid, classification.version);
    if (typeof refusal === 'string') return { outcome: 'refused', reason: refusal };
    let symbols: NativePythonSymbols;
    try {
      symbols = this.native.pythonSymbols(pid);
    } catch (err) {
      return failed(err);
    }
    if (!symbols.runtime) return { outcome: 'refused', reason: `${symbols.file} exports no _PyRuntime` };
    const state = interpreterState(refusal.layout, readMemory(pid, symbols.runtime, RUNTIME_BYTES));
    if (state === 'starting') return NO_SAFE_POINT;
    if (state === 'finalizing') return { outcome: 'gone' };
    if (state === 'unknown')
      return { outcome: 'refused', reason: `${symbols.file}: _PyRuntime is not laid out as expected` };
    try {
      const bootstrap = refusal.filtered ? this.bootstraps.filtered : this.bootstraps.free;
      const queued = await this.native.queuePythonCode(pid, symbols, bootstrap, QUEUE_TIMEOUT_MS);
      // -1: the interpreter's pending calls are full for now
      if (queued !== 0) return NO_SAFE_POINT;
    } catch (err) {
      return failed(err);
    }
    return { outcome: 'hooked' };
  }
}

/**
 * Why the hook stays out of a CPython process before anything is sent, or the layout it reads and
 * whether a seccomp filter might refuse the getpriority the hook's mailbox signals with (an
 * unreadable status counts as one).
 */
function refusalOf(
  pid: number,
  version: PythonVersion,
): string | { layout: RuntimeLayout; filtered: boolean } {
  if (isKreplays(pid)) return "kreplay's own process, or one kreplay runs";
  const layout = runtimeLayout(version);
  if (!layout) return `python${version.major}.${version.minor}: the hook knows CPython 3.11 to 3.13`;
  if (optedOut(readText(() => readFileSync(`/proc/${pid}/environ`, 'latin1')) ?? ''))
    return 'KREPLAY_PYTHON_HOOK=off in its environment';
  const status = readText(() => readFileSync(`/proc/${pid}/status`, 'utf8'));
  const tracer = tracerPid(status ?? '');
  if (tracer !== 0) return `already traced by process ${tracer}`;
  return { layout, filtered: status === null || parseSeccomp(status) };
}

/** The process or one of its ancestors runs kreplay (`kreplay run`, `replay --exec`, the agent). */
export function isKreplays(pid: number): boolean {
  for (let at = pid, hops = 0; at > 1 && hops < 64; hops++) {
    if (isKreplayCommand(readText(() => readFileSync(`/proc/${at}/cmdline`, 'latin1')) ?? '')) return true;
    const stat = parseStat(readStat(at) ?? '');
    if (!stat) return false;
    at = stat.ppid;
  }
  return false;
}

/** A step in the process that threw: whether it is worth another try. */
function failed(err: unknown): InjectResult {
  const code: ErrorCode | undefined = isErrorCode((err as { code?: unknown }).code)
    ? (err as { code: ErrorCode }).code
    : undefined;
  const reason = (err as Error).message;
  switch (code) {
    case 'E_PY_INJECT_GONE':
      return { outcome: 'gone' };
    case 'E_PY_INJECT_TIMEOUT':
    case 'E_PY_INJECT_STATE':
      return NO_SAFE_POINT;
    case 'E_PY_INJECT_PERM':
    case 'E_PY_INJECT_SYMBOLS':
      return { outcome: 'refused', reason };
    default:
      return { outcome: 'failed', reason };
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
