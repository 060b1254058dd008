/** Facts about the host the capture depends on: clocks, tracefs, privileges, BTF. */
import fs from 'node:fs';
import type { Logger } from '../../core/log/logger';
import { toCaptureError } from './capture-error';
import { nativeAddon } from '../../core/native/addon';

/**
 * CLOCK_REALTIME - CLOCK_BOOTTIME: add it to a record's boot-clock
 * timestamp to get wall-clock nanoseconds, exact to within errorNs.
 */
export function clockOffset(): { offsetNs: bigint; errorNs: number } {
  return nativeAddon().clockOffset();
}

/** Mounts tracefs at /sys/kernel/tracing when its events are not visible. */
export function ensureTracefs(log: Logger): void {
  let mounted: boolean;
  try {
    mounted = nativeAddon().ensureTracefs();
  } catch (err) {
    throw toCaptureError(err);
  }
  if (mounted) log.info('mounted tracefs at /sys/kernel/tracing');
}

const CAP_SYS_ADMIN = 21n;
export const CAP_SYS_NICE = 23n;
const CAP_PERFMON = 38n;
const CAP_BPF = 39n;

/** This process's effective capability set, one bit per capability number. */
export function effectiveCapabilities(): bigint {
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  return hex ? BigInt(`0x${hex}`) : 0n;
}

export function holdsCapability(caps: bigint, cap: bigint): boolean {
  return ((caps >> cap) & 1n) === 1n;
}

/** Whether this host and process can run a capture at all, and if not, why. */
export function captureSupport(): { ok: true } | { ok: false; reason: string } {
  if (process.platform !== 'linux')
    return { ok: false, reason: `capture needs Linux, not ${process.platform}` };
  const caps = effectiveCapabilities();
  const has = (cap: bigint): boolean => holdsCapability(caps, cap);
  if (!has(CAP_SYS_ADMIN) && !(has(CAP_BPF) && has(CAP_PERFMON))) {
    return { ok: false, reason: 'capture needs root, or CAP_BPF and CAP_PERFMON' };
  }
  if (!fs.existsSync('/sys/kernel/btf/vmlinux')) {
    return { ok: false, reason: 'the kernel has no BTF (/sys/kernel/btf/vmlinux missing)' };
  }
  if (!fs.existsSync('/sys/kernel/tracing') && !fs.existsSync('/sys/kernel/debug/tracing/events')) {
    return { ok: false, reason: 'the kernel has no tracefs (/sys/kernel/tracing missing)' };
  }
  return { ok: true };
}
