/**
 * The clock thread's warm-up (issue 48): its release path run once before
 * the first play, on a lane of its own, through the real sockets code onto
 * a real descriptor, as a session's lane would run it.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fs from 'node:fs';
import { clockSockets } from '../../daemon/replay/clock/clock-sockets';
import { SEND_BUFFER } from '../../daemon/replay/send-buffer';
import { warmRelease, WARM_RELEASES } from '../../daemon/replay/clock/clock-warm';

describe('clock warm-up', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(join(tmpdir(), 'kreplay-clock-warm-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('releases its frames one look at a time to the descriptor, each with its lateness, between its first and last text', () => {
    const path = join(dir, 'out');
    const fd = fs.openSync(path, 'w');
    let nowNs = 5_000_000.25;
    const closed: number[] = [];
    let lateness: number[];
    try {
      lateness = warmRelease(
        {
          sockets: (reportClosed) =>
            clockSockets(
              fs,
              SEND_BUFFER,
              () => nowNs++,
              (...args) => {
                closed.push(args[2]);
                reportClosed(...args);
              },
            ),
          now: () => nowNs,
        },
        fd,
      );
    } finally {
      fs.closeSync(fd);
    }
    // look i comes (i + 1) × 1,234 ns after its frame's deadline
    const expected = Array.from({ length: WARM_RELEASES }, (_, i) => (i + 1) * 1_234);
    expect(lateness).toEqual(expected);
    const frames = expected.map(
      (late, i) => `id: ${i}\nevent: replay\ndata: {"emitted_late_ns":${late}}\n\n`,
    );
    expect(fs.readFileSync(path, 'utf8')).toBe([': warm\n\n', ...frames, ': done\n\n'].join(''));
    // the watcher is let go of as a detached one is; the descriptor stays the caller's to close
    expect(closed).toHaveLength(1);
  });
});
