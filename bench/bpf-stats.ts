/**
 * The benches' one switch of the kernel's per-program run-time statistics (bpf_stats: run_cnt and
 * run_time_ns). While they are on, every run of every BPF program on the host pays two clock reads,
 * so they are on only while a bench measures them: through BPF_ENABLE_STATS, whose fd keeps them on
 * until it is closed or this process dies (Ctrl-C included). kernel.bpf_stats_enabled, the
 * host-wide sysctl, is never written: a bench leaves the host as it found it.
 */
import fs from 'node:fs';
import { nativeAddon } from '../core/native/addon';

const SYSCTL = '/proc/sys/kernel/bpf_stats_enabled';

/** Runs `measure` with BPF run-time statistics on, and turns them off (as far as this process holds them) after. */
export async function withBpfStats<T>(measure: () => Promise<T>): Promise<T> {
  const fd = nativeAddon().enableBpfStats();
  try {
    return await measure();
  } finally {
    fs.closeSync(fd);
  }
}

/** Whether the host-wide sysctl holds the statistics on (someone else's choice): then no run here is without them. */
export function hostWideBpfStats(): boolean {
  return fs.readFileSync(SYSCTL, 'utf8').trim() !== '0';
}
