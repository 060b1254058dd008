/** What a capture records, and the checks that turn options into the addon's config. */
import { COMM_LEN, MAX_FILTER_PIDS } from '../../core/model';
import { CaptureError } from './capture-error';
import type { NativeCaptureConfig } from '../../core/native/addon';

export interface CaptureOptions {
  /** power of two, at least one page; default 64 MiB */
  ringBufferBytes?: number;
  /** the kernel wakes the reader each time this many more bytes are unread (batching); default 1 MiB, at most a quarter of the ring */
  wakeupBytes?: number;
  /** the reader also drains the ring this often; default 100 */
  pollTimeoutMs?: number;
  /** default true: skip this process */
  excludeSelf?: boolean;
  /** only these processes (tgids), at most MAX_FILTER_PIDS */
  pids?: number[];
  cgroupId?: bigint;
  /** exact comm, at most 15 bytes */
  comm?: string;
  minDurationNs?: number;
  /** default true: follow context markers and HTTP heads */
  attribution?: boolean;
  /** default true: resolve what each write went to (file path, socket peer, pipe) */
  targets?: boolean;
}

/** Ring buffer sizes (powers of two) a capture accepts; the CLI's --ring-buffer-mb takes its bounds from here. */
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
  const pids = options.pids ?? [];
  if (pids.length > MAX_FILTER_PIDS)
    invalid(`at most ${MAX_FILTER_PIDS} pids can be filtered, got ${pids.length}`);
  for (const pid of pids) {
    if (!Number.isInteger(pid) || pid < 1 || pid > 0xffff_ffff) invalid(`pids holds an invalid pid: ${pid}`);
  }
  const comm = options.comm ?? '';
  if (Buffer.byteLength(comm) > COMM_LEN - 1 || comm.includes('\0')) {
    invalid(`comm must be at most ${COMM_LEN - 1} bytes without NUL, got ${JSON.stringify(comm)}`);
  }
  const cgroupId = options.cgroupId ?? 0n;
  if (cgroupId < 0n || cgroupId >= 2n ** 64n)
    invalid(`cgroupId must be an unsigned 64-bit id, got ${cgroupId}`);
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
    pids: [...pids],
    cgroupId,
    comm,
    minDurationNs: nonNegativeInteger('minDurationNs', options.minDurationNs ?? 0),
    attribution: options.attribution ?? true,
    targets: options.targets ?? true,
  };
}
