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

  /** Events from..to-1's, NaN where unknown: what a history page's frames carry, handed to the thread that builds them. */
  slice(from: number, to: number): Float64Array {
    const out = new Float64Array(to - from).fill(NaN);
    for (let at = from; at < to;) {
      const page = Math.floor(at / PAGE);
      const end = Math.min(to, (page + 1) * PAGE);
      const held = this.pages[page];
      if (held) out.set(held.subarray(at % PAGE, (at % PAGE) + (end - at)), at - from);
      at = end;
    }
    return out;
  }

  get(index: number): bigint | null {
    const late = this.pages[Math.floor(index / PAGE)]?.[index % PAGE];
    return late === undefined || Number.isNaN(late) ? null : BigInt(late);
  }
}
