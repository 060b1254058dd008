/**
 * `kreplay replay TXN` (and `--incident FILE --server URL`): a session on the daemon, played, its
 * events printed as one line of JSON each on stdout when the session emits them, so a pipeline sees
 * the calls at their recorded pace. Progress goes to stderr, and only to a terminal. Ctrl-C, or the
 * reader of stdout going away, stops the session.
 */
import { KreplayError } from '../core/errors';
import type { Logger } from '../core/log/logger';
import { followResuming } from '../core/stream-resume';
import { askShortestSlice } from '../core/threads/shortest-slice';
import { postJson, problemText, unreachable } from './daemon-request';
import { sessionLinks } from './session-links';
import { ReplayLines, type ReplayRead } from './replay-lines';
import { warmReplayPath } from './replay-warm';
import { openReplayStream } from './replay-stream';
import type { ChunkStream } from './response-stream';
import { HttpError } from './sse-client';

/** What a session is replayed with. */
export interface SessionFlags {
  speed: number;
  extraLatencyNs: number;
}

interface SessionBody {
  id: string;
  state: string;
  events_total: number;
}

/** Reconnections in a row (with Last-Event-ID) that bring nothing new before giving up on a stream. */
const RECONNECTS = 5;
const RECONNECT_DELAY_MS = 500;
const PROGRESS_EVERY_MS = 100;

/** Writes to stdout (synchronous on a pipe or file); a promise only when it is full, settled once it drains. */
function writeOut(bytes: Buffer): Promise<void> | undefined {
  if (process.stdout.write(bytes)) return undefined;
  return new Promise((resolve) => process.stdout.once('drain', resolve));
}

const NOTHING = Buffer.alloc(0);

/** One status line, redrawn in place, on a terminal only. */
class Progress {
  private shownAt = -Infinity;

  constructor(readonly enabled: boolean) {}

  show(text: string, force = false): void {
    // performance.now(): after a wall clock step back the line would stand still for the step
    const now = performance.now();
    if (!this.enabled || (!force && now - this.shownAt < PROGRESS_EVERY_MS)) return;
    this.shownAt = now;
    process.stderr.write(`\r\x1b[K${text}`);
  }

  clear(): void {
    if (this.enabled && this.shownAt > -Infinity) process.stderr.write('\r\x1b[K');
  }
}

class Replay {
  private lastEventId: string | undefined;
  private emitted = 0;
  private stream: ChunkStream | null = null;
  /** closed by Ctrl-C, stdout going away or the end: no connection is made or followed after */
  private closed = false;
  private readonly progress = new Progress(process.stderr.isTTY === true);

  constructor(
    private readonly base: string,
    private readonly session: SessionBody,
  ) {}

  /** Follows the stream to the end, reconnecting after the last event seen when the connection drops. */
  run(): Promise<void> {
    const follow = () =>
      this.follow().catch((err: unknown) => {
        if (err instanceof HttpError) throw new Error(problemText(err.status, err.body), { cause: err });
        throw err;
      });
    return followResuming(
      follow,
      { attempts: RECONNECTS, waitMs: RECONNECT_DELAY_MS },
      {
        lastSeen: () => this.lastEventId,
        // system errors (refused, reset) are worth a retry; anything else (an answer that cannot be read among them) is an answer
        retriable: (err) =>
          !(err instanceof KreplayError) && typeof (err as NodeJS.ErrnoException).code === 'string',
        giveUp: (networkError) =>
          networkError
            ? unreachable(this.base, networkError)
            : new Error(`the event stream of session ${this.session.id} keeps ending`),
      },
    );
  }

  /**
   * True once the session finished; false when the stream ended before.
   * Each chunk's events are printed in one write, in the turn the chunk is
   * read (no promise between the socket and stdout), so that a dense replay
   * costs a turn per chunk; the play a (re)connection asks for is not waited
   * for before reading on, so the first events are printed the moment they
   * come, as every later one is.
   */
  private async follow(): Promise<boolean> {
    if (this.closed) return true;
    const stream = await openReplayStream(`${this.base}/${this.session.id}/events`, this.lastEventId);
    // closed while it connected: a stream read now would meet the session stopped (an error)
    if (this.closed) {
      stream.close();
      return true;
    }
    this.stream = stream;
    const lines = new ReplayLines();
    let first = true;
    let playing: Promise<unknown> | null = null;
    let failure: unknown = null;
    let finished = false;
    await stream.listen((chunk) => {
      const read = lines.push(chunk);
      let stopped = false;
      for (const message of read.others) {
        if (message.event !== 'state') continue;
        const { state } = JSON.parse(message.data) as { state: string };
        // each (re)connection starts with the state: one not playing is ours to start (again)
        if (first && (state === 'ready' || state === 'paused')) {
          // the first events must not meet cold code on their way out: the way they are printed
          // runs once now, with nothing to print, and the way they are read before the play is
          // asked for (a warm-up that fails changes no event: the play goes on)
          void writeOut(NOTHING);
          const gc = globalThis.gc;
          playing = warmReplayPath(gc && (() => gc()))
            .catch(() => undefined)
            .then(() => this.control('play'))
            .catch((err: unknown) => {
              failure = err;
              stream.close();
            });
        }
        first = false;
        if (state === 'finished') finished = true;
        if (state === 'stopped') stopped = true;
      }
      // the events emitted before a stop are printed, then the stop is the answer
      const printed = this.print(read, lines);
      if (stopped) throw new Error(`session ${this.session.id} was stopped`);
      if (finished) stream.close();
      return printed;
    });
    await playing;
    if (failure) throw failure as Error;
    if (finished) this.close();
    // done once closed, at the end or by Ctrl-C or stdout's end: a closed stream is not resumed
    // (Ctrl-C's stop would meet it as "was stopped")
    return this.closed;
  }

  /**
   * Prints a read's events in one write (none: nothing written); a promise
   * when stdout is full, settled once it drains. The lines' buffer serves
   * the next read unless stdout still holds them.
   */
  private print(read: ReplayRead, lines: ReplayLines): Promise<void> | undefined {
    if (read.lines.length === 0) return undefined;
    const drained = writeOut(read.lines);
    if (process.stdout.writableLength > 0) lines.keep();
    if (read.lastId === undefined) return drained;
    this.lastEventId = read.lastId;
    this.emitted = Number(read.lastId) + 1;
    if (this.progress.enabled) {
      const last = read.lines.toString('utf8', read.lastLine);
      const offset = /"replay_offset_ns":(\d+)/.exec(last)?.[1] ?? '0';
      this.progress.show(
        `replay ${this.session.id}: ${this.emitted}/${this.session.events_total} events, ` +
          `${(Number(offset) / 1e9).toFixed(3)} s in`,
        this.emitted === this.session.events_total,
      );
    }
    return drained;
  }

  control(control: 'play' | 'stop'): Promise<SessionBody> {
    return postJson<SessionBody>(`${this.base}/${this.session.id}/${control}`);
  }

  close(): void {
    this.closed = true;
    this.stream?.close();
    this.progress.clear();
  }
}

export async function runReplay(
  transactionId: string,
  server: string,
  flags: SessionFlags,
  log: Logger,
): Promise<void> {
  const base = `${server}/api/replay/sessions`;
  // over node:http, as the play: the play's answer, taken during the lead before the first event,
  // then meets code that ran once already (as the process's first POST it cost 2-4 ms of CPU)
  const session = await postJson<SessionBody>(base, {
    transaction_id: transactionId,
    speed_factor: flags.speed,
    extra_latency_ns: flags.extraLatencyNs,
  });
  // where to follow it, with the progress: on a terminal only (a pipeline reads stdout alone)
  if (process.stderr.isTTY) {
    const links = sessionLinks(server, session.id, transactionId);
    process.stderr.write(
      `kreplay: session ${session.id}\nkreplay:   API: ${links.api}\nkreplay:   web: ${links.web}\n`,
    );
  }
  // the main thread reads the stream and prints it: each read is ~0.1 ms of work, woken once a
  // look of the daemon's; on a busy host it waited for a core around most late events (issue 48)
  const slice = askShortestSlice(process.pid, "the stream's reader", log);
  if (slice) log.debug(`the stream's reader runs on the fair scheduler's ${slice}`, { thread: process.pid });
  const replay = new Replay(base, session);
  // Ctrl-C, or the reader of stdout going away: stop the session rather than leave it playing
  const stop = async (code: number) => {
    replay.close();
    await replay.control('stop').catch(() => undefined);
    process.exit(code);
  };
  const onInterrupt = () => void stop(130);
  const onStdoutError = (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') void stop(0);
  };
  process.once('SIGINT', onInterrupt);
  process.stdout.on('error', onStdoutError);
  try {
    await replay.run();
  } finally {
    replay.close();
    process.off('SIGINT', onInterrupt);
    process.stdout.off('error', onStdoutError);
  }
}
