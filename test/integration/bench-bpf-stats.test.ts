/**
 * The benches' bpf_stats switch (bench/bpf-stats.ts, issue 46): the kernel counts the agent's
 * programs' runs while a bench measures, and kernel.bpf_stats_enabled, the host-wide sysctl, is as
 * the bench found it afterwards (a bench once left it at 1 for good: every BPF program on the host
 * then paid two clock reads a run). Writes come from real processes (sh).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startCapture } from '../../agent/capture';
import { silentLogger } from '../../core/log/logger';
import { withBpfStats } from '../../bench/bpf-stats';
import { useTempDir } from '../support/temp-dir';
import { waitFor } from '../support/wait';
import { describeKernel } from './capture-harness';

const SYSCTL = '/proc/sys/kernel/bpf_stats_enabled';
const sysctl = () => readFileSync(SYSCTL, 'utf8').trim();

describeKernel('the benches bpf_stats switch', () => {
  const tmp = useTempDir('kreplay-bpf-stats-');

  test('counts the programs runs while held and leaves the sysctl as it found it', async () => {
    const found = sysctl();
    const capture = startCapture({}, () => undefined, silentLogger);
    try {
      const writeRuns = () => capture.programStats().find((p) => p.name === 'sys_enter_write')?.runCount ?? 0;
      const file = join(tmp.path, 'out');
      await withBpfStats(async () => {
        const before = writeRuns();
        execFileSync('/bin/sh', ['-c', `for i in 1 2 3 4 5 6 7 8; do echo $i >> ${file}; done`]);
        await waitFor(() => writeRuns() >= before + 8, { what: 'the kernel counting sh writes' });
        expect(sysctl()).toBe(found);
      });
      expect(sysctl()).toBe(found);
    } finally {
      await capture.stop();
    }
  });
});
