/**
 * Gives memory back once a burst of load is over. A storm's sockets, requests and buffers are
 * garbage once it ends, but V8 keeps the heap it grew until a full collection it may not run while
 * the daemon is idle, and the C heap keeps freed pages: the daemon's RSS stayed at its peak (564
 * MB after an SSE storm). When the load that took them ends (the last stream closes, an upload is
 * done), after a short quiet, one full collection runs and the C heap's free pages go back to the
 * kernel (malloc_trim). Only when the load grew the main thread's heap (what the collection
 * gives back) by GROWTH_BYTES at least: a full collection stops the main thread for its whole
 * length (120–520 ms measured under load with a 20–45 MB heap), and a replay grows it by less (a
 * dense one: 32 to 55 MB), so every replay cost a pause of the daemon's answers two seconds
 * after its stream closed. Not RSS: a playing session's frames (shared memory, up to 128 MiB)
 * grow it, and no collection gives them back.
 */
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { nativeAddon } from '../../core/native/addon';

/** V8's full collection, made callable without starting Node with --expose-gc. */
function fullCollection(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** How long after the load ended the trim runs: a storm that goes on does not trim on every close. */
const QUIET_MS = 2_000;

/** Heap grown since the last trim (or the least seen) that is worth a full collection: more than a replay's. */
export const GROWTH_BYTES = 32 * 2 ** 20;

export class MemoryTrim {
  private timer: NodeJS.Timeout | null = null;
  trims = 0;

  /** the heap after the last trim, or the least seen since: what growth is counted from */
  private base: number;

  constructor(
    private readonly trim: () => void = (() => {
      const collect = fullCollection();
      return () => {
        collect();
        nativeAddon().trimMemory();
      };
    })(),
    private readonly heapBytes: () => number = () => getHeapStatistics().total_heap_size,
  ) {
    this.base = heapBytes();
  }

  /** The load that took memory ended: trim after QUIET_MS, unless more ends meanwhile (then later), if it grew the process. */
  loadEnded(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      const now = this.heapBytes();
      if (now - this.base < GROWTH_BYTES) {
        this.base = Math.min(this.base, now);
        return;
      }
      this.trims++;
      this.trim();
      this.base = this.heapBytes();
    }, QUIET_MS).unref();
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
