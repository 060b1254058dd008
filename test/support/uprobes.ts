/** The uprobes the kernel lists (bpftool perf), for tests that check where an agent put its probes. */
import { execFileSync } from 'node:child_process';

export interface Uprobe {
  /** the process that holds it (an agent) */
  pid: number;
  progId: number;
  retprobe: boolean;
  filename: string;
  offset: number;
}

export function listUprobes(): Uprobe[] {
  const perf = JSON.parse(execFileSync('bpftool', ['-j', 'perf', 'show']).toString()) as {
    pid: number;
    prog_id: number;
    fd_type?: string;
    filename?: string;
    offset?: number;
  }[];
  return perf
    .filter((p) => (p.fd_type === 'uprobe' || p.fd_type === 'uretprobe') && p.filename !== undefined)
    .map((p) => ({
      pid: p.pid,
      progId: p.prog_id,
      retprobe: p.fd_type === 'uretprobe',
      filename: p.filename!,
      offset: p.offset ?? 0,
    }));
}

/** Each BPF program's name and run count (run_cnt: 0 unless bpf_stats are on), by id. */
export function programsById(): Map<number, { name: string; runs: number }> {
  const progs = JSON.parse(execFileSync('bpftool', ['-j', 'prog', 'show']).toString()) as {
    id: number;
    name?: string;
    run_cnt?: number;
  }[];
  return new Map(progs.map((p) => [p.id, { name: p.name ?? '', runs: p.run_cnt ?? 0 }]));
}
