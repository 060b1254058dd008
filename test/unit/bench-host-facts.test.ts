/**
 * A bench's host line (bench/host-facts.ts): the write's cost is a number the loop printed, or null
 * with the reason, never a made-up figure.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeHost, writeCost, type HostFacts } from '../../bench/host-facts';

const dir = mkdtempSync(join(tmpdir(), 'kreplay-host-facts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A stand-in for writeloop printing `lines` in turn, one a run. */
function loop(name: string, lines: string[]): string {
  const file = join(dir, name);
  const counter = join(dir, `${name}.n`);
  writeFileSync(counter, '0');
  writeFileSync(
    file,
    `#!/bin/sh\nn=$(cat ${counter}); echo $((n + 1)) > ${counter}\ncase $n in\n` +
      lines.map((line, i) => `${i}) echo '${line}';;\n`).join('') +
      'esac\n',
  );
  chmodSync(file, 0o755);
  return file;
}

const host = (writeNs: number | null, writeNsMissing?: string): HostFacts => ({
  cpuModel: 'AMD EPYC',
  cpus: 2,
  kernel: '6.18.0',
  node: 'v24.0.0',
  writeNs,
  ...(writeNsMissing ? { writeNsMissing } : {}),
  loadavg: [0.25, 1, 2],
});

describe('the host a bench ran on', () => {
  it("takes the median of the loop's three runs", () => {
    expect(writeCost(loop('three', ['310.5', '205.1', '400.0']))).toEqual({ writeNs: 310.5 });
  });

  it('says why when the loop is not built, or prints no number', () => {
    const missing = join(dir, 'absent');
    expect(writeCost(missing)).toEqual({
      writeNs: null,
      writeNsMissing: `${missing} is not built (make bench builds it)`,
    });
    const garbled = loop('garbled', ['310.5', 'oops', '300']);
    expect(writeCost(garbled)).toEqual({
      writeNs: null,
      writeNsMissing: `${garbled} failed: it printed 310.5, NaN, 300`,
    });
  });

  it('prints one line naming the CPU, the kernel, the write and the load', () => {
    expect(describeHost(host(305.4))).toBe(
      'host: AMD EPYC, 2 CPUs, Linux 6.18.0, a 64-byte write to /dev/null 305 ns, load 0.25',
    );
    expect(describeHost(host(null, 'why'))).toBe(
      'host: AMD EPYC, 2 CPUs, Linux 6.18.0, write not measured: why, load 0.25',
    );
  });
});
