/**
 * An event stream's response read from its connection's bytes, with no
 * node:http between them (cli/replay-stream.ts gives it a socket's reads;
 * cli/replay-warm.ts a made-up stream's). Its head is read once; each read
 * of the body after it is handed to the listener as it is, in the read's
 * turn. A dense replay's CLI spent a third of its main thread in node:http's
 * layers (llhttp copying each read into a new buffer, the response's
 * Readable, the ticks between them): bench/RESULTS.md, issue 48, cli48raw.
 */
import { BodyReader } from './http-body';
import { bodyFraming, HeadReader } from './http-head';
import { HttpError } from './sse-client';

/** What the stream reads from: told to stop reading while the listener's output is full, and to go on. */
export interface Connection {
  /** reading resumes (after a read was answered false) */
  resume(): void;
  destroy(): void;
}

export interface ChunkStream {
  /**
   * Each read's body bytes handed to `onChunk` in the read's turn, with no
   * promise or generator between the socket and the reader, which parses
   * them its own way: how a dense replay's client keeps up
   * (cli/replay-lines.ts). A chunk is a view of a buffer the next read
   * writes over: what is kept of it must be copied. A promise `onChunk`
   * returns holds the socket (the reader's output is full) until it
   * settles. Resolves when the stream ends or is closed; rejects on a
   * broken connection or what `onChunk` throws.
   */
  listen(onChunk: Listener): Promise<void>;
  /** ends a listen in progress, and the connection */
  close(): void;
}

type Listener = (chunk: Buffer) => void | Promise<void>;

/** An error of the connection, as node:http gives a dropped one: a code, so it is retried. */
export function connectionDropped(message: string): Error {
  return Object.assign(new Error(message), { code: 'ECONNRESET' });
}

export class ResponseStream implements ChunkStream {
  /** resolves with the stream on a 200 answer; rejects with an HttpError (its body read), or why there was none */
  readonly opened: Promise<ChunkStream>;
  private open!: { resolve(stream: ChunkStream): void; reject(err: unknown): void };
  private readonly head = new HeadReader();
  /** the 200 answer's body, or another answer's (read into `errorBody`, with its status) */
  private body: BodyReader | null = null;
  private status = 0;
  private readonly errorBody: Buffer[] = [];
  /** body bytes read with the head, before anyone listened (a copy) */
  private early: Buffer | null = null;
  private listener: Listener | null = null;
  private settle: { resolve(): void; reject(err: unknown): void } | null = null;
  /** a listener's promise is pending: the connection is held */
  private waiting = false;
  private closed = false;
  /** how the stream ended before a listen settled it (null: it has not) */
  private outcome: { error: unknown } | null = null;

  constructor(private readonly connection: Connection) {
    this.opened = new Promise((resolve, reject) => (this.open = { resolve, reject }));
  }

  /** One read's bytes; false when the connection must stop reading until `resume`. */
  read(bytes: Buffer): boolean {
    try {
      if (this.body === null) return this.readHead(bytes);
      if (this.status !== 200) return this.readErrorBody(bytes);
      const body = this.body.push(bytes);
      if (this.listener === null) return this.keepEarly(body);
      return this.deliver(body);
    } catch (err) {
      this.fail(err);
      return false;
    }
  }

  /** The connection's end (EOF): the body's, when nothing else frames it. */
  end(): void {
    if (this.body?.endsWithConnection) {
      if (this.status !== 200) return this.rejectError();
      if (!this.waiting) return this.finish(null);
      // the last read's listener is still writing: the end waits for it
      this.outcome ??= { error: null };
      return;
    }
    if (this.body === null)
      this.fail(connectionDropped('the server closed the connection before its answer'));
    else if (!this.body.ended) this.fail(connectionDropped('the event stream closed before its end'));
  }

  /** The connection failed or closed; the stream closed by `close` ends without error. */
  fail(err: unknown): void {
    this.connection.destroy();
    if (this.body === null || this.status !== 200) this.open.reject(err);
    else this.finish(this.closed ? null : err);
  }

  listen(onChunk: Listener): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
      this.listener = onChunk;
      const early = this.early;
      this.early = null;
      try {
        // the bytes read with the head first; then how the stream ended, if it has
        if (early !== null && !this.deliver(early)) return;
      } catch (err) {
        return this.fail(err);
      }
      if (this.outcome) this.finish(this.outcome.error);
      else this.connection.resume();
    });
  }

  close(): void {
    this.closed = true;
    this.early = null;
    this.connection.destroy();
    this.finish(null);
  }

  private readHead(bytes: Buffer): boolean {
    const read = this.head.push(bytes);
    if (read === null) return true;
    this.status = read.head.status;
    this.body = new BodyReader(bodyFraming(read.head));
    if (this.status !== 200) return this.readErrorBody(read.rest);
    this.open.resolve(this);
    return this.keepEarly(this.body.push(read.rest));
  }

  /** Body bytes read before anyone listens: kept (a copy: the socket's buffer is written over by its next read), the connection held. */
  private keepEarly(body: Buffer): false {
    if (body.length > 0) this.early = this.early ? Buffer.concat([this.early, body]) : Buffer.from(body);
    if (this.body!.ended) {
      this.connection.destroy();
      this.outcome = { error: null };
    }
    return false;
  }

  private readErrorBody(bytes: Buffer): boolean {
    this.errorBody.push(Buffer.from(this.body!.push(bytes)));
    if (this.body!.ended) this.rejectError();
    return true;
  }

  private rejectError(): void {
    this.connection.destroy();
    this.open.reject(new HttpError(this.status, Buffer.concat(this.errorBody).toString('utf8')));
  }

  /** Hands body bytes to the listener; false while its promise holds the connection. */
  private deliver(data: Buffer): boolean {
    if (data.length > 0) {
      const wait = this.listener!(data);
      if (wait) {
        this.waiting = true;
        wait.then(
          () => {
            this.waiting = false;
            if (this.outcome || this.body!.ended) this.finish(this.outcome?.error ?? null);
            else this.connection.resume();
          },
          (err: unknown) => this.fail(err),
        );
        return false;
      }
    }
    if (this.body!.ended) {
      this.connection.destroy();
      this.finish(null);
      return false;
    }
    return true;
  }

  /** Settles the listen (or, before one, keeps how the stream ended for it). */
  private finish(error: unknown): void {
    const settle = this.settle;
    if (settle === null) {
      this.outcome ??= { error };
      return;
    }
    this.settle = null;
    this.outcome = { error };
    if (error === null || error === undefined) settle.resolve();
    else settle.reject(error);
  }
}
