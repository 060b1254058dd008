/**
 * Gives memory back once a burst of load is over. A storm's sockets, requests and buffers are
 * garbage once it ends, but V8 keeps the heap it grew until a full collection it may not run while
 * the daemon is idle, and the C heap keeps freed pages: the daemon's RSS stayed at its peak (564
 * MB after an SSE storm). When the load that took them ends (the last stream closes, an upload is
 * done), after a short quiet, one full collection runs and the C heap's free pages go back to the
 * kernel (malloc_trim). Only when the load grew the main thread's old generation by GROWTH_BYTES
 * at least: a full collection stops the main thread for its whole length (120–520 ms measured
 * under load with a 20–45 MB heap), and a replay grows it by less (a dense one: 19 to 32 MB; a
 * storm of 5,000 SSE connections: 19 to 50 MB). Not the whole heap: V8 sizes the young generation
 * for the rate of allocation (16 to 64 MiB over a dense replay polled meanwhile), and a collection
 * while requests go on leaves it so (96 MB before, 93 after): counted, every dense replay cost a
 * pause of the daemon's answers two seconds after its stream closed. Not RSS: a playing
 * session's frames (shared memory, up to 128 MiB) grow it, and no collection gives them back.
 */
import { getHeapSpaceStatistics, setFlagsFromString, type HeapSpaceInfo } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { nativeAddon } from '../../core/native/addon';

/** V8's full collection, made callable without starting Node with --expose-gc. */
function fullCollection(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** How long after the load ended the trim runs: a storm that goes on does not trim on every close. */
const QUIET_MS = 2_000;

/** Old generation grown since the last trim (or the least seen) that is worth a full collection: more than a replay's. */
export const GROWTH_BYTES = 20 * 2 ** 20;

/** The young generation's spaces: sized for the rate of allocation, not for what a load left behind. */
const YOUNG_SPACES = new Set(['new_space', 'new_large_object_space']);

/** The heap V8 holds outside its young generation (bytes committed): what a load leaves behind. */
export const oldGenerationBytes = (spaces: readonly HeapSpaceInfo[]): number =>
  spaces.reduce((sum, space) => (YOUNG_SPACES.has(space.space_name) ? sum : sum + space.space_size), 0);

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
    private readonly heapBytes: () => number = () => oldGenerationBytes(getHeapSpaceStatistics()),
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
