/**
 * One client's text/event-stream response. It starts on the main thread (the
 * headers, and history for a resuming client); once nothing it wrote waits in
 * Node's buffers, the session hands it to the clock (handOver), whose thread
 * writes its replay frames to the socket at release. A TLS stream stays with
 * the main thread: its bytes must go through Node's TLS.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { TLSSocket } from 'node:tls';
import type { Response } from 'express';
import type { LaneSockets, SocketClosed } from '../replay-clock';
import type { Watcher } from './broadcast';
import { SEND_BUFFER } from '../send-buffer';
import { SSE_HEARTBEAT } from './sse-frame';

const HEARTBEAT_MS = 15_000;
/** How often a stream waiting to hand over looks whether Node's buffers are empty. */
const IDLE_POLL_MS = 1;

/** The descriptor of a plain TCP socket (Node keeps it on its handle), or null. */
function socketFd(socket: Response['socket']): number | null {
  if (!socket || socket instanceof TLSSocket) return null;
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : null;
}

export class SseWatcher implements Watcher {
  private closed = false;
  /** armed while more than SEND_BUFFER.softBytes wait to be read */
  private stall: NodeJS.Timeout | null = null;
  /** the clock's sockets and this watcher's id there, once handed over */
  private clock: { sockets: LaneSockets; id: number } | null = null;

  constructor(
    private readonly res: Response,
    onClose: () => void,
    /** told when the stream is cut for falling behind its send buffer's bound */
    private readonly onCut: () => void = () => undefined,
  ) {
    res.status(200).set({
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      // nginx would otherwise hold events back to fill its buffer
      'X-Accel-Buffering': 'no',
      // a stream is never reused for another request; when it ends, so does the connection
      Connection: 'close',
    });
    // the body runs until the connection closes, unframed: the clock thread writes into it directly
    res.removeHeader('Content-Length');
    res.removeHeader('Transfer-Encoding');
    res.flushHeaders();
    const heartbeat = setInterval(() => this.write(SSE_HEARTBEAT), HEARTBEAT_MS).unref();
    res.on('close', () => {
      this.closed = true;
      clearInterval(heartbeat);
      if (this.stall) clearTimeout(this.stall);
      if (this.clock) this.clock.sockets.detach(this.clock.id);
      onClose();
    });
  }

  get open(): boolean {
    return !this.closed;
  }

  get direct(): boolean {
    return this.clock !== null;
  }

  /** True when nothing written waits in Node's buffers (the socket's included). */
  get idle(): boolean {
    return this.res.writableLength === 0 && (this.res.socket?.writableLength ?? 0) === 0;
  }

  /** Resolves once idle (true) or closed (false). */
  async drained(): Promise<boolean> {
    while (!this.closed && !this.idle) await sleep(IDLE_POLL_MS);
    return !this.closed;
  }

  handOver(sockets: LaneSockets, fromIndex: number, first: string): boolean {
    const fd = socketFd(this.res.socket);
    if (this.closed || this.clock || fd === null || !this.idle) return false;
    const id = sockets.attach(fd, fromIndex, first, (reason) => this.closedByClock(reason));
    this.clock = { sockets, id };
    return true;
  }

  private closedByClock(reason: SocketClosed): void {
    // the clock's copy is closed: ours ends the connection (after nothing, the body being unframed)
    if (reason === 'ended') this.res.end();
    else this.cutOff(reason === 'cut');
  }

  /** Destroys the connection; `behind`: because the client fell behind its send buffer's bound. */
  private cutOff(behind: boolean): void {
    if (behind && !this.closed) this.onCut();
    this.res.destroy();
  }

  write(text: string): void {
    if (this.closed) return;
    if (this.clock) return this.clock.sockets.send(this.clock.id, text);
    this.res.write(text);
    const buffered = this.res.writableLength;
    if (buffered > SEND_BUFFER.hardBytes) this.cutOff(true);
    else if (buffered > SEND_BUFFER.softBytes && !this.stall) this.watchStall();
  }

  /** Cuts the stream if the client takes nothing from its socket for stallMs while it is over the limit. */
  private watchStall(): void {
    const taken = this.res.socket?.bytesWritten ?? 0;
    this.stall = setTimeout(() => {
      this.stall = null;
      if (this.res.writableLength <= SEND_BUFFER.softBytes) return;
      if ((this.res.socket?.bytesWritten ?? 0) === taken) this.cutOff(true);
      else this.watchStall();
    }, SEND_BUFFER.stallMs).unref();
  }

  /** Writes at the client's pace; false once the client is gone. Only before a hand-over. */
  async send(chunk: string | Uint8Array): Promise<boolean> {
    if (this.closed) return false;
    if (!this.res.write(chunk)) {
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
    if (this.closed) return;
    if (this.clock) this.clock.sockets.end(this.clock.id);
    else this.res.end();
  }
}
