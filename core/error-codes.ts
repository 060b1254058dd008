/**
 * Every error code kreplay gives, with what it means: the one registry. A
 * KreplayError takes only a code named here (or an HTTP problem's, from
 * core/problem-kinds.ts); the native addon's codes (native/*.cc) are here
 * too, and test/unit/error-codes.test.ts fails on a code used anywhere and
 * not registered, or registered and used nowhere. The reference page of
 * codes is generated from this table.
 */
import { PROBLEM_KINDS, problemCode, type ProblemCode, type ProblemKind } from './problem-kinds';

export const ERROR_CODES = {
  // capture (the agent's BPF programs; most are thrown by the native addon)
  E_CAPTURE_CONFIG: 'a capture option is invalid (a filter, a size, a tunable)',
  E_CAPTURE_PERM: 'the process may not load BPF programs (needs root, or CAP_BPF with CAP_PERFMON)',
  E_CAPTURE_NO_BTF: 'the kernel has no BTF (/sys/kernel/btf/vmlinux), which the CO-RE programs need',
  E_CAPTURE_NO_TRACEPOINT: 'a tracepoint the capture needs does not exist on this kernel',
  E_CAPTURE_LOAD: "the kernel's verifier refused kreplay's BPF programs",
  E_CAPTURE_ATTACH: 'a BPF program could not be attached to its tracepoint',
  E_CAPTURE_RINGBUF: 'the ring buffer could not be sized or polled',
  E_CAPTURE_STATS: 'BPF run-time statistics could not be enabled',
  E_CAPTURE_STATE: 'a capture was started twice, or used after it stopped',
  E_CLOCK_WATCH:
    "the wall clock's sets cannot be watched (a timerfd): the clock offset is measured again once a minute only",
  E_CORRUPT_RECORD: 'a record from the kernel does not decode (its type, size or fields are out of bounds)',
  E_NATIVE_LOAD: 'the native addon could not be loaded (not built, or built for another Node)',
  // the agent's store and configuration
  E_CONFIG: 'the --config file cannot be read or is invalid',
  E_FILTER: 'an --include/--exclude selector is invalid',
  E_DATA_DIR: 'the data directory cannot be made or written',
  E_STORE_LOCKED: 'another kreplay agent is writing the same node store',
  E_STORE_THREAD: "the agent's writer thread failed",
  E_STORE_OPEN: 'a node store cannot be opened',
  E_STORE_NOT_KREPLAY: 'the file is not a kreplay node store',
  E_STORE_NEWER_SCHEMA: 'the node store was written by a newer kreplay',
  E_STORE_CORRUPT: 'the node store is damaged',
  E_METRICS_LISTEN: 'the agent cannot listen on --metrics-listen',
  E_NODE_HOOK: "a Node process's inspector did not take the hook (it stays unattributed, counted and logged)",
  E_NODE_GUARD:
    'the kernel guard of the Node inspector (bpf/inspector_guard.bpf.c) could not be set up: no Node process is hooked',
  E_OTLP_SETTING:
    'an OTLP export setting (--otlp, the otlp config section, an OTEL_EXPORTER_OTLP_* variable) is invalid',
  // ClickHouse (the fleet store)
  E_CLICKHOUSE_URL: 'a ClickHouse URL is invalid',
  E_CLICKHOUSE_DOWN: 'ClickHouse does not answer',
  E_CLICKHOUSE_REFUSED: 'ClickHouse refused a query or an insert',
  E_CLICKHOUSE_SCHEMA: "ClickHouse's tables are not kreplay's, or of a newer kreplay",
  // incident files
  E_INCIDENT_READ: 'an incident file cannot be read',
  E_INCIDENT_NOT_INCIDENT: 'the file is not an incident file (not a zstd frame)',
  E_INCIDENT_TRUNCATED: 'the incident file ends early',
  E_INCIDENT_CORRUPT: 'the incident file is damaged',
  E_INCIDENT_DIGEST: "the incident file's contents do not match its digest",
  E_INCIDENT_NEWER: 'the incident file was written by a newer kreplay',
  // the daemon
  E_TOKENS: 'the --tokens file cannot be read or is invalid',
  E_UNSAFE_BIND: 'the daemon was asked to listen beyond loopback without tokens',
  E_INVALID_VALUE: 'a query value is invalid',
  // the replay clock
  E_SCHED: "the replay clock thread's scheduling could not be set",
  E_SCHED_PERM: 'real-time scheduling needs CAP_SYS_NICE',
  E_PIPE: "the replay clock's doorbell pipe could not be made",
  E_DUP: "a watcher's socket could not be duplicated for the clock thread",
  E_CLOCK_STALLED: 'the replay clock thread did not answer in time',
  // replay --exec (the seccomp supervisor and relay; thrown by the native addon)
  E_SECCOMP: 'the seccomp supervisor could not be set up',
  E_EXEC_PLAN: 'the replay plan handed to the supervisor is invalid',
  E_EXEC_HANDOFF: 'the launcher could not hand its seccomp listener over',
  E_EXEC_SECCOMP:
    "seccomp user notification is not available (a container's seccomp profile forbids seccomp(), or the kernel lacks it): nothing can be held",
  E_EXEC_RELAY: 'the relay of held responses could not be set up',
  // the Python hook (agent/runtimes/python/; thrown by the native addon, native/python/py_inject.cc)
  E_PY_INJECT_PERM:
    'ptrace of a Python process was refused (Yama, an LSM, a tracer already attached, no CAP_SYS_PTRACE)',
  E_PY_INJECT_GONE: 'the Python process ended before its hook was queued',
  E_PY_INJECT_SYMBOLS:
    'the process maps no interpreter that exports Py_AddPendingCall and PyRun_SimpleString',
  E_PY_INJECT_TIMEOUT:
    "the Python process's main thread reached no system call, or did not answer, before the deadline",
  E_PY_INJECT_STATE:
    'the Python process is stopped by job control, or runs on an architecture the hook is not queued on',
  E_PY_INJECT_FAILED: 'a step of queuing the Python hook failed in the process (it was left as it was)',
  // the CLI and the threads
  E_HTTP: 'the daemon answered a CLI request with an HTTP error',
  E_HTTP_PROTOCOL:
    'an answer the CLI reads from its socket is not HTTP/1.x as it reads it, or framed or encoded a way it does not read',
  E_NO_CHECKOUT: "kreplay's own files are not where the launcher expects them",
  E_THREAD_MODULE: "a worker thread's module is missing (run make build)",
} as const satisfies Record<`E_${string}`, string>;

/**
 * Codes kreplay gave once and gives no more, with what they meant and why they went: a code is
 * never reused with another meaning (a script that matched the old one would take the new one for
 * it). test/unit/error-codes.test.ts fails on a code removed from this registry or from
 * core/problem-kinds.ts (as git's history shows) and not listed here, and on a listed code given
 * again.
 */
export const RETIRED_ERROR_CODES = {
  E_CAPTURE_NATIVE: 'the native addon was not built or not found; since 2026-11-22 E_NATIVE_LOAD',
  E_STORE_OLDER_SCHEMA:
    "a node store older than the daemon's schema; retired 2026-11-22: the daemon reads older stores as they are",
  E_TRANSACTION_TOO_LARGE:
    'problem transaction-too-large (422), a replayed transaction past its bound; retired 2026-11-23: replay reads the store in pages',
  E_HPACK:
    "an HTTP/2 connection's frames or header blocks could not be followed; retired 2026-11-25 with the agent's HPACK decoder",
} as const satisfies Record<`E_${string}`, string>;

/** A code a KreplayError may carry. */
export type ErrorCode = keyof typeof ERROR_CODES | ProblemCode;

/** True for a code the registry (or an HTTP problem kind) names: what crosses from the addon or a thread is checked with it. */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && (Object.hasOwn(ERROR_CODES, code) || PROBLEM_CODES.has(code));
}

const PROBLEM_CODES: ReadonlySet<string> = new Set(
  (Object.keys(PROBLEM_KINDS) as ProblemKind[]).map((kind) => problemCode(kind)),
);
