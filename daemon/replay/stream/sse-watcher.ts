/** One client's text/event-stream response. */
import type { Response } from 'express';
import type { Watcher } from './broadcast';
import { SSE_HEARTBEAT } from './sse-frame';

const HEARTBEAT_MS = 15_000;
/**
 * A watcher that does not read is cut off rather than buffered without
 * bound; it reconnects with Last-Event-ID and catches up from the store, at
 * its own pace. Past MAX_BUFFERED_BYTES waiting, it is cut if it read
 * nothing in STALL_MS (a dense burst outruns any reader for a moment, a
 * reader that keeps reading is not cut); past HARD_MAX_BUFFERED_BYTES it is
 * cut at once. With --max-streams this bounds what the streams hold.
 */
export const MAX_BUFFERED_BYTES = 256 << 10;
const HARD_MAX_BUFFERED_BYTES = 8 << 20;
const STALL_MS = 2000;

export class SseWatcher implements Watcher {
  private closed = false;
  /** armed while more than MAX_BUFFERED_BYTES wait to be read */
  private stall: NodeJS.Timeout | null = null;

  constructor(
    private readonly res: Response,
    onClose: () => void,
  ) {
    res.status(200).set({
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      // nginx would otherwise hold events back to fill its buffer
      'X-Accel-Buffering': 'no',
      // a stream is never reused for another request; when it ends, so does the connection
      Connection: 'close',
    });
    res.flushHeaders();
    const heartbeat = setInterval(() => this.write(SSE_HEARTBEAT), HEARTBEAT_MS).unref();
    res.on('close', () => {
      this.closed = true;
      clearInterval(heartbeat);
      if (this.stall) clearTimeout(this.stall);
      onClose();
    });
  }

  get open(): boolean {
    return !this.closed;
  }

  write(text: string): void {
    if (this.closed) return;
    this.res.write(text);
    const buffered = this.res.writableLength;
    if (buffered > HARD_MAX_BUFFERED_BYTES) this.res.destroy();
    else if (buffered > MAX_BUFFERED_BYTES && !this.stall) this.watchStall();
  }

  /** Cuts the stream if the client takes nothing from its socket for STALL_MS while it is over the limit. */
  private watchStall(): void {
    const taken = this.res.socket?.bytesWritten ?? 0;
    this.stall = setTimeout(() => {
      this.stall = null;
      if (this.res.writableLength <= MAX_BUFFERED_BYTES) return;
      if ((this.res.socket?.bytesWritten ?? 0) === taken) this.res.destroy();
      else this.watchStall();
    }, STALL_MS).unref();
  }

  /** Writes at the client's pace; false once the client is gone. */
  async send(text: string): Promise<boolean> {
    if (this.closed) return false;
    if (!this.res.write(text)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.res.off('drain', done).off('close', done);
          resolve();
        };
        this.res.on('drain', done).on('close', done);
      });
    }
    return !this.closed;
  }

  end(): void {
    if (!this.closed) this.res.end();
  }
}
