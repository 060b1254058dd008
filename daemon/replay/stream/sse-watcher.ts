/** One client's text/event-stream response. */
import type { Response } from 'express';
import type { Watcher } from './broadcast';
import { SSE_HEARTBEAT } from './sse-frame';

const HEARTBEAT_MS = 15_000;
/**
 * A watcher that reads slower than the replay is cut off rather than
 * buffered without bound; it reconnects with Last-Event-ID and catches up
 * from the store, at its own pace.
 */
const MAX_BUFFERED_BYTES = 8 << 20;

export class SseWatcher implements Watcher {
  private closed = false;

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
      onClose();
    });
  }

  get open(): boolean {
    return !this.closed;
  }

  write(text: string): void {
    if (this.closed) return;
    this.res.write(text);
    if (this.res.writableLength > MAX_BUFFERED_BYTES) this.res.destroy();
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
