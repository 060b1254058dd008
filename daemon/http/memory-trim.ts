/**
 * Gives memory back once a burst of load is over. A storm's sockets, requests and buffers are
 * garbage once it ends, but V8 keeps the heap it grew until a full collection it may not run while
 * the daemon is idle, and the C heap keeps freed pages: the daemon's RSS stayed at its peak (564
 * MB after an SSE storm). When the load that took them ends (the last stream closes, an upload is
 * done), after a short quiet, one full collection runs and the C heap's free pages go back to the
 * kernel (malloc_trim). Only when the load grew the process by GROWTH_BYTES at least: a full
 * collection stops the main thread for its whole length (15–40 ms with a 20–50 MB heap on the
 * 2-core host, 300 ms under load), and a replay's stream closing grows nothing worth it (a dense
 * replay: the heap from 32 to 54 MB), so every replay cost a pause of the daemon's answers two
 * seconds after its stream closed.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { nativeAddon } from '../../core/native/addon';

/** V8's full collection, made callable without starting Node with --expose-gc. */
function fullCollection(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** How long after the load ended the trim runs: a storm that goes on does not trim on every close. */
const QUIET_MS = 2_000;

/** RSS grown since the last trim (or the least seen) that is worth a full collection: a storm's, 160 MiB or more. */
export const GROWTH_BYTES = 64 * 2 ** 20;

export class MemoryTrim {
  private timer: NodeJS.Timeout | null = null;
  trims = 0;

  /** the RSS after the last trim, or the least seen since: what growth is counted from */
  private base: number;

  constructor(
    private readonly trim: () => void = (() => {
      const collect = fullCollection();
      return () => {
        collect();
        nativeAddon().trimMemory();
      };
    })(),
    private readonly rss: () => number = process.memoryUsage.rss,
  ) {
    this.base = rss();
  }

  /** The load that took memory ended: trim after QUIET_MS, unless more ends meanwhile (then later), if it grew the process. */
  loadEnded(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      const now = this.rss();
      if (now - this.base < GROWTH_BYTES) {
        this.base = Math.min(this.base, now);
        return;
      }
      this.trims++;
      this.trim();
      this.base = this.rss();
    }, QUIET_MS).unref();
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
