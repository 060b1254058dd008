/**
 * How many event streams may be open, in all and per client: each holds a
 * socket (a file descriptor) and up to its send buffer of memory, so idle or
 * stuck clients must not take every descriptor and the daemon's memory from
 * everyone else. Past a limit, a new stream is 503 with Retry-After, logged.
 */
import type { Logger } from '../../../core/log/logger';
import { ProblemError } from '../../http/problem';

export const DEFAULT_MAX_STREAMS = 1024;
/** An eighth of the total: one client cannot hold every stream. */
export const DEFAULT_MAX_STREAMS_PER_CLIENT = 128;

export class StreamLimits {
  private total = 0;
  /** streams cut because their client fell behind its send buffer's bound (SEND_BUFFER), since start */
  private cutCount = 0;
  private readonly perClient = new Map<string, number>();

  constructor(
    private readonly log: Logger,
    readonly max = DEFAULT_MAX_STREAMS,
    readonly maxPerClient = DEFAULT_MAX_STREAMS_PER_CLIENT,
    /** told when the last open stream closes (the daemon gives its memory back then) */
    private readonly onIdle: () => void = () => undefined,
  ) {}

  get open(): number {
    return this.total;
  }

  get cuts(): number {
    return this.cutCount;
  }

  /**
   * A stream of `client` was cut: it fell behind past its send buffer's bound
   * (a reader too slow for a dense replay, or none). Its client resumes with
   * Last-Event-ID; counted and logged, so that a replay late at its client
   * can be told from one cut and read again from the store.
   */
  cut(client: string): void {
    this.cutCount++;
    this.log.warn(
      'event stream cut: its client fell behind its send buffer; it may resume with Last-Event-ID',
      {
        client,
      },
    );
  }

  /** Counts a new stream of `client`, or throws the 503; call the returned function once it closes. */
  acquire(client: string): () => void {
    const own = this.perClient.get(client) ?? 0;
    const refusal =
      this.total >= this.max
        ? `${this.total} event streams are open, the most this daemon serves (--max-streams)`
        : own >= this.maxPerClient
          ? `${client} has ${own} event streams open, the most one client may have (--max-streams-per-client)`
          : null;
    if (refusal) {
      this.log.warn('event stream refused', { client, open: this.total, clientOpen: own });
      throw new ProblemError('too-many-streams', `${refusal}; close one first`, undefined, {
        'Retry-After': '5',
      });
    }
    this.total++;
    this.perClient.set(client, own + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const left = (this.perClient.get(client) ?? 1) - 1;
      if (left > 0) this.perClient.set(client, left);
      else this.perClient.delete(client);
      if (this.total === 0) this.onIdle();
    };
  }
}
