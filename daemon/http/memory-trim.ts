/**
 * Gives memory back once a burst of load is over. A storm's sockets, requests and buffers are
 * garbage once it ends, but V8 keeps the heap it grew until a full collection it may not run while
 * the daemon is idle, and the C heap keeps freed pages: the daemon's RSS stayed at its peak (564
 * MB after an SSE storm). When the load that took them ends (the last stream closes, an upload is
 * done), after a short quiet, one full collection runs and the C heap's free pages go back to the
 * kernel (malloc_trim). A full collection of the daemon's heap takes milliseconds, once per storm.
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

export class MemoryTrim {
  private timer: NodeJS.Timeout | null = null;
  trims = 0;

  constructor(
    private readonly trim: () => void = (() => {
      const collect = fullCollection();
      return () => {
        collect();
        nativeAddon().trimMemory();
      };
    })(),
  ) {}

  /** The load that took memory ended: trim after QUIET_MS, unless more ends meanwhile (then later). */
  loadEnded(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.trims++;
      this.trim();
    }, QUIET_MS).unref();
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
