/** Whether this host and process can run a capture at all, and if not, why: kernel tests say so loudly. */
import fs from 'node:fs';
import { nativeAddon } from '../../core/native/addon';

export const CAP_SYS_NICE = 23n;

/** This process's effective capability set, one bit per capability number. */
export function effectiveCapabilities(): bigint {
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  return hex ? BigInt(`0x${hex}`) : 0n;
}

export function holdsCapability(caps: bigint, cap: bigint): boolean {
  return ((caps >> cap) & 1n) === 1n;
}

export function captureSupport(): { ok: true } | { ok: false; reason: string } {
  if (process.platform !== 'linux')
    return { ok: false, reason: `capture needs Linux, not ${process.platform}` };
  // the addon's own check, the one its permission errors use
  if (!nativeAddon().hasBpfCapabilities()) {
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
