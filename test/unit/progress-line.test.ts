/** The progress line of long CLI counts (cli/progress-line.ts) under a wall clock step. */
import { ProgressLine } from '../../cli/progress-line';
import { HOUR_MS, useWallStep } from '../support/wall-step';

const wall = useWallStep();

/** A log file's stderr: not a terminal, so a line every 10 s and the last one. */
function logStream(): { out: NodeJS.WriteStream; lines: string[] } {
  const lines: string[] = [];
  const out = { isTTY: false, write: (text: string) => lines.push(text) };
  return { out: out as unknown as NodeJS.WriteStream, lines };
}

describe('progress line', () => {
  it('tells the time a count took, not minus an hour, when the clock stepped back meanwhile', () => {
    const { out, lines } = logStream();
    const progress = new ProgressLine(out, 'ship', 10);
    progress.update(5);
    expect(lines).toEqual([expect.stringMatching(/^ship: 50\.0% 5\/10 events \d+\/s/)]);
    wall.step(-HOUR_MS);
    progress.finish('10 events shipped');
    expect(lines[1]).toMatch(/^ship: 10 events shipped in 0\.\d s\n$/);
  });

  it('holds its next line for 10 s, though the clock stepped an hour on', () => {
    const { out, lines } = logStream();
    const progress = new ProgressLine(out, 'ship', 10);
    progress.update(5);
    wall.step(HOUR_MS);
    progress.update(6);
    expect(lines).toHaveLength(1);
  });
});
