/**
 * Every released event's lateness, by its index, so that a stream resuming
 * with Last-Event-ID (one cut for falling behind, say) gets the same
 * `emitted_late_ns` the live stream had, however far back it resumes.
 * 8 bytes per event, in pages allocated as the replay reaches them; exact
 * (nanoseconds below 2^53, 104 days). Unknown (null): an event not released
 * in this daemon's life, as after a restart.
 */
const PAGE = 1 << 16;

export class LatenessLog {
  private readonly pages: Float64Array[] = [];

  set(index: number, lateNs: bigint): void {
    const p = Math.floor(index / PAGE);
    const page = (this.pages[p] ??= new Float64Array(PAGE).fill(NaN));
    page[index % PAGE] = Number(lateNs);
  }

  get(index: number): bigint | null {
    const late = this.pages[Math.floor(index / PAGE)]?.[index % PAGE];
    return late === undefined || Number.isNaN(late) ? null : BigInt(late);
  }
}
