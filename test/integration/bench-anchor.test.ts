/**
 * The replay-client bench's host anchor (issue 48): bench/timedlines.c writes the sparse
 * session's schedule as NDJSON lines, and the probe reads them from its stdout as it reads
 * `kreplay replay`'s; the dense one in the clock's looks, through a relay process over loopback
 * TCP. The lines, their offsets, their order and how they are grouped are checked, never a time.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '../../core/repo-root';
import { benchLoop } from '../../bench/bench-loops';
import type { ProbeResult } from '../../bench/replay-probe';
import { timing } from '../../bench/replay-timing';

const PROBE = join(repoRoot(), 'dist', 'bench', 'replay-probe.js');

function probe(...args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [PROBE, 'anchor', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, out, err })));
}

describe('the replay benches host anchor', () => {
  it('reads every line the timed writer prints, in order, with its offset and lateness', async () => {
    const { code, out } = await probe(benchLoop('timedlines'), '40', '2000000');
    expect(code).toBe(0);
    const result = JSON.parse(out) as ProbeResult;
    expect(result.events).toBe(40);
    expect(result.outOfOrder).toBe(0);
    expect(result.nullLateness).toBe(0);
    expect(result.offsets).toEqual(Array.from({ length: 40 }, (_, i) => i * 2_000_000));
    for (const late of result.released) expect(late).toBeGreaterThanOrEqual(0);
    for (let i = 1; i < result.arrivals.length; i++)
      expect(result.arrivals[i]).toBeGreaterThanOrEqual(result.arrivals[i - 1]!);
    // the bench's own summary of it: relative to the first line, the best-served line late by 0
    const t = timing(result);
    expect(t.late.p50).toBeGreaterThanOrEqual(0);
    expect(t.vsFirst.max).toBeGreaterThanOrEqual(0);
  });

  it('writes a dense schedule in looks, each line once and in order, through the relay', async () => {
    const lines = 5_000;
    const { code, out } = await probe(benchLoop('timedlines'), String(lines), '10000', '250000', 'relay');
    expect(code).toBe(0);
    const result = JSON.parse(out) as ProbeResult;
    expect(result.events).toBe(lines);
    expect(result.outOfOrder).toBe(0);
    expect(result.offsets).toEqual(Array.from({ length: lines }, (_, i) => i * 10_000));
    for (const late of result.released) expect(late).toBeGreaterThanOrEqual(0);
    // a look writes every line due by then at once (25 at 10 µs apart and 250 µs a look): the
    // reader's chunks, each stamped once, are far fewer than the lines
    expect(new Set(result.arrivals).size).toBeLessThan(lines / 4);
  });

  it('fails naming the writer when it refuses its arguments', async () => {
    const exe = benchLoop('timedlines');
    const { code, err } = await probe(exe, '0', '2000000');
    expect(code).not.toBe(0);
    expect(err).toContain(`${exe} exited 2`);
    expect(err).toContain('usage: timedlines N GAP_NS');
    const relayNamed = await probe(exe, '10', '10000', '250000', 'relayed');
    expect(relayNamed.code).not.toBe(0);
    expect(relayNamed.err).toContain('usage: timedlines N GAP_NS [LOOK_NS [relay]]');
  });
});
