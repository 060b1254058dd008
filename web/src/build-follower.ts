/**
 * The writes of the build a replay session drives (`kreplay replay --exec`):
 * the build is marked with the transaction `<incident>-replay-<session id>`,
 * so a running agent records them; they are read here through the public
 * events API every second while the session lives, so they show beside the
 * incident's lanes as the build makes them.
 */
import { eventsPage, type ApiEvent } from './api';

const POLL_MS = 1000;

export class BuildFollower {
  readonly events: ApiEvent[] = [];
  private readonly seen = new Set<string>();
  /** the last event's ts: the next read starts there (inclusive; events already seen are skipped) */
  private lastTs: string | null = null;
  private timer = 0;
  private closed = false;

  constructor(
    readonly transactionId: string,
    private readonly changed: (events: ApiEvent[]) => void,
    private readonly failed: (message: string) => void,
  ) {
    void this.poll();
  }

  private async poll(): Promise<void> {
    try {
      let added = false;
      let cursor: string | null = null;
      do {
        const params = new URLSearchParams({ transaction_id: this.transactionId, limit: '10000' });
        if (this.lastTs) params.set('from', this.lastTs);
        if (cursor) params.set('cursor', cursor);
        const page = await eventsPage(params);
        for (const e of page.events) {
          if (this.seen.has(e.event_id)) continue;
          this.seen.add(e.event_id);
          this.events.push(e);
          this.lastTs = e.timestamp_ns;
          added = true;
        }
        cursor = page.next_cursor;
      } while (cursor && !this.closed);
      if (added && !this.closed) this.changed(this.events);
    } catch (err) {
      this.failed((err as Error).message);
    }
    if (!this.closed) this.timer = window.setTimeout(() => void this.poll(), POLL_MS);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }
}
