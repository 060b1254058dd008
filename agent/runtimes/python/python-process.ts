/**
 * What the agent reads of a process before it queues the Python hook, as plain functions over the
 * text of /proc/<pid>/*: which interpreter it runs, whether it opted out, whether a tracer holds it,
 * and whether its interpreter is up (from the bytes of _PyRuntime).
 */
import { basename } from 'node:path';

export interface PythonVersion {
  major: number;
  minor: number;
}

/** The environment variable a process opts out with: KREPLAY_PYTHON_HOOK=off. */
export const OPT_OUT_VARIABLE = 'KREPLAY_PYTHON_HOOK';

/**
 * The CPython a process runs, from its executable's name (python3.11), else from a libpython3.X it
 * maps (`maps`, /proc/PID/maps): an unversioned python, or a program that embeds the interpreter
 * (uwsgi's python plugin, mod_wsgi). null: not one.
 */
export function pythonVersion(exe: string, maps = ''): PythonVersion | null {
  const named = /^python(\d+)\.(\d+)$/.exec(basename(exe.replace(/ \(deleted\)$/, '')));
  const m = named ?? /\/libpython(\d+)\.(\d+)[^/\s]*\.so/.exec(maps);
  return m ? { major: Number(m[1]), minor: Number(m[2]) } : null;
}

/** KREPLAY_PYTHON_HOOK=off (any case) in the process's initial environment (/proc/<pid>/environ). */
export function optedOut(environ: string): boolean {
  return environ.split('\0').some((entry) => entry.toLowerCase() === `${OPT_OUT_VARIABLE.toLowerCase()}=off`);
}

/** TracerPid from /proc/<pid>/status: the process that ptraces it, 0 for none. */
export function tracerPid(status: string): number {
  const m = /^TracerPid:\s*(\d+)$/m.exec(status);
  return m ? Number(m[1]) : 0;
}

/** Whether a command line (/proc/<pid>/cmdline, NUL-separated) is kreplay's: its launcher's script. */
export function isKreplayCommand(cmdline: string): boolean {
  return cmdline.split('\0').some((arg) => basename(arg) === 'kreplay.js');
}

/**
 * Where _PyRuntime says that the interpreter is up and not finalizing: `initialized` (an int, 1 once
 * Py_Initialize finished) and `_finalizing` (a pointer, set by Py_FinalizeEx). 3.11 and 3.12 start
 * the struct with five ints; 3.13 puts _Py_DebugOffsets first, which gives _finalizing's offset.
 * null: a version whose layout is not known here (the hook is not queued).
 */
export type RuntimeLayout =
  { kind: 'fixed'; initialized: number; finalizing: number } | { kind: 'debug-offsets' };

export function runtimeLayout(version: PythonVersion): RuntimeLayout | null {
  if (version.major !== 3) return null;
  if (version.minor === 11 || version.minor === 12) return { kind: 'fixed', initialized: 16, finalizing: 24 };
  if (version.minor === 13) return { kind: 'debug-offsets' };
  return null;
}

/** Bytes of _PyRuntime the layout's fields lie within, from its start. */
export const RUNTIME_BYTES = 4096;

export type InterpreterState = 'ready' | 'starting' | 'finalizing' | 'unknown';

/**
 * The interpreter's state from the first RUNTIME_BYTES of _PyRuntime. 'unknown': the debug offsets
 * are not there, or name a free-threaded build (the hook is not queued).
 */
export function interpreterState(layout: RuntimeLayout, runtime: Buffer): InterpreterState {
  let initialized: number;
  let finalizing: number;
  if (layout.kind === 'fixed') {
    ({ initialized, finalizing } = layout);
  } else {
    // _Py_DebugOffsets: cookie[8], version, free_threaded, runtime_state {size, finalizing, ...}
    if (runtime.subarray(0, 8).toString('latin1') !== 'xdebugpy' || runtime.readBigUInt64LE(16) !== 0n)
      return 'unknown';
    finalizing = Number(runtime.readBigUInt64LE(32));
    // int initialized right before the (aligned) _finalizing pointer
    initialized = finalizing - 8;
  }
  if (finalizing + 8 > runtime.length || initialized < 0) return 'unknown';
  if (runtime.readBigUInt64LE(finalizing) !== 0n) return 'finalizing';
  return runtime.readInt32LE(initialized) === 1 ? 'ready' : 'starting';
}
