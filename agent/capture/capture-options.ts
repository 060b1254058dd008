/** What a capture records, and the checks that turn options into the addon's config. */
import { COMM_LEN, MAX_FILTER_PIDS } from '../../core/model';
import { CaptureError } from './capture-error';
import { MAX_SAMPLE_ONE_IN } from '../filter/selector';
import type { NativeCaptureConfig, NativeFilterSet } from '../../core/native/addon';

/** A task as the kernel filter names it: its process (tgid), its exact comm, or its cgroup v2 id. */
export type KernelSelector = { pid: number } | { comm: string } | { cgroupId: bigint };

export interface CaptureOptions {
  /** power of two, at least one page; default 64 MiB */
  ringBufferBytes?: number;
  /** the kernel wakes the reader each time this many more bytes are unread (batching); default 1 MiB, at most a quarter of the ring */
  wakeupBytes?: number;
  /** the reader also drains the ring this often; default 100 */
  pollTimeoutMs?: number;
  /** default true: skip this process */
  excludeSelf?: boolean;
  /** when given (even empty), only tasks matching one of these; at most MAX_FILTER_PIDS pids */
  include?: KernelSelector[];
  /** never these tasks; wins over include */
  exclude?: KernelSelector[];
  /** cgroup ids are also given later (Capture.setCgroupFilter): look them up even while none are */
  liveCgroups?: boolean;
  /** default false: events of a thread in a transaction are kept even when excluded */
  filterTransactions?: boolean;
  /** keep one in N writes made outside any context (1: all, the default) */
  sampleBackground?: number;
  minDurationNs?: number;
  /** default true: follow context markers and HTTP heads */
  attribution?: boolean;
  /** default true: resolve what each call went to (file path, socket peer, pipe) */
  targets?: boolean;
  /** default false: record the reads of threads without a context too (--capture-reads) */
  captureReads?: boolean;
}

/**
 * Ring buffer sizes (powers of two) a capture accepts; the CLI's --ring-buffer-mb takes its bounds from here.
 * The ring is what absorbs a burst the agent cannot keep up with, and all of it is resident in
 * the agent (native/capture/ring_reader.h maps it once): the 64 MiB default keeps the agent's whole RSS
 * under 256 MiB in a storm (issue 14).
 */
export const RING_BUFFER_BYTES = { min: 4096, max: 1024 * 1024 * 1024, default: 64 * 1024 * 1024 } as const;
const DEFAULT_WAKEUP_BYTES = 1024 * 1024;
const DEFAULT_POLL_TIMEOUT_MS = 100;

function invalid(message: string): never {
  throw new CaptureError('E_CAPTURE_CONFIG', message);
}

export function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n > 0 && 2 ** Math.round(Math.log2(n)) === n;
}

function nonNegativeInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0)
    invalid(`${name} must be a non-negative integer, got ${value}`);
  return value;
}

function sampleRate(n: number): number {
  if (!Number.isInteger(n) || n < 1 || n > MAX_SAMPLE_ONE_IN)
    invalid(`sampleBackground must be an integer from 1 to ${MAX_SAMPLE_ONE_IN}, got ${n}`);
  return n;
}

function checkCgroupId(id: bigint): bigint {
  if (id < 1n || id >= 2n ** 64n) invalid(`a cgroup id must be an unsigned 64-bit id above 0, got ${id}`);
  return id;
}

function filterSet(selectors: KernelSelector[]): NativeFilterSet {
  const set: NativeFilterSet = { pids: [], comms: [], cgroupIds: [] };
  for (const s of selectors) {
    if ('pid' in s) {
      if (!Number.isInteger(s.pid) || s.pid < 1 || s.pid > 0xffff_ffff) invalid(`invalid pid: ${s.pid}`);
      set.pids.push(s.pid);
    } else if ('comm' in s) {
      if (!s.comm || Buffer.byteLength(s.comm) > COMM_LEN - 1 || s.comm.includes('\0'))
        invalid(`a comm must be 1 to ${COMM_LEN - 1} bytes without NUL, got ${JSON.stringify(s.comm)}`);
      set.comms.push(s.comm);
    } else {
      set.cgroupIds.push(checkCgroupId(s.cgroupId));
    }
  }
  if (set.pids.length > MAX_FILTER_PIDS)
    invalid(`at most ${MAX_FILTER_PIDS} pids can be filtered, got ${set.pids.length}`);
  return set;
}

export function toNativeConfig(options: CaptureOptions): NativeCaptureConfig {
  const ringBufferBytes = options.ringBufferBytes ?? RING_BUFFER_BYTES.default;
  const { min, max } = RING_BUFFER_BYTES;
  if (!isPowerOfTwo(ringBufferBytes) || ringBufferBytes < min || ringBufferBytes > max) {
    invalid(`ringBufferBytes must be a power of two from ${min} to ${max}, got ${ringBufferBytes}`);
  }
  const pollTimeoutMs = options.pollTimeoutMs ?? DEFAULT_POLL_TIMEOUT_MS;
  if (!Number.isInteger(pollTimeoutMs) || pollTimeoutMs < 1 || pollTimeoutMs > 60_000) {
    invalid(`pollTimeoutMs must be an integer from 1 to 60000, got ${pollTimeoutMs}`);
  }
  // A threshold the ring cannot reach would leave only the poll timeout to wake the reader.
  const wakeupBytes = Math.min(options.wakeupBytes ?? DEFAULT_WAKEUP_BYTES, ringBufferBytes / 4);
  if (!Number.isSafeInteger(wakeupBytes) || wakeupBytes < 1) {
    invalid(`wakeupBytes must be a positive integer, got ${options.wakeupBytes}`);
  }
  return {
    ringBufferBytes,
    wakeupBytes,
    pollTimeoutMs,
    selfTgid: options.excludeSelf === false ? 0 : process.pid,
    filter: {
      include: filterSet(options.include ?? []),
      exclude: filterSet(options.exclude ?? []),
      includes: options.include !== undefined,
      cgroupFilter: options.liveCgroups ?? false,
      transactions: options.filterTransactions ?? false,
    },
    sampleBackground: sampleRate(options.sampleBackground ?? 1),
    minDurationNs: nonNegativeInteger('minDurationNs', options.minDurationNs ?? 0),
    attribution: options.attribution ?? true,
    targets: options.targets ?? true,
    captureReads: options.captureReads ?? false,
  };
}
