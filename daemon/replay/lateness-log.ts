/**
 * Every released event's lateness, by its index, so that a stream resuming
 * with Last-Event-ID (one cut for falling behind, say) gets the same
 * `emitted_late_ns` the live stream had, however far back it resumes.
 * 8 bytes per event, in pages of shared memory: the main thread makes a page
 * before the replay reaches it (`ensure`), the clock thread that releases the
 * events writes into it (`adopt` on its side). Exact (nanoseconds below
 * 2^53, 104 days). Unknown (null): an event not released in this daemon's
 * life, as after a restart.
 */
const PAGE = 1 << 16;

export class LatenessLog {
  private readonly pages: Float64Array[] = [];

  /** Pages that index `index` needs and that were not made yet, by number: the clock is handed each. */
  ensure(index: number): { page: number; shared: SharedArrayBuffer }[] {
    const made: { page: number; shared: SharedArrayBuffer }[] = [];
    for (let p = 0; p <= Math.floor(index / PAGE); p++) {
      if (this.pages[p]) continue;
      const shared = new SharedArrayBuffer(PAGE * Float64Array.BYTES_PER_ELEMENT);
      this.adopt(p, shared).fill(NaN);
      made.push({ page: p, shared });
    }
    return made;
  }

  /** Page `page` is `shared` (the clock thread's side of a page the main thread made). */
  adopt(page: number, shared: SharedArrayBuffer): Float64Array {
    return (this.pages[page] = new Float64Array(shared));
  }

  set(index: number, lateNs: bigint | number): void {
    if (index < 0) return;
    if (!this.pages[Math.floor(index / PAGE)]) this.ensure(index);
    this.pages[Math.floor(index / PAGE)]![index % PAGE] = Number(lateNs);
  }

  get(index: number): bigint | null {
    const late = this.pages[Math.floor(index / PAGE)]?.[index % PAGE];
    return late === undefined || Number.isNaN(late) ? null : BigInt(late);
  }
}
