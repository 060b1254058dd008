/**
 * A replay stream's bytes as `kreplay replay` prints them: each read's replay
 * events' data, a line each, copied into one buffer for one write, and only
 * the read's last id decoded (the Last-Event-ID of a resume). A dense replay
 * brings 100,000 events a second, and a message object, an id string and a
 * view per event were most of the CLI's CPU (their collections first).
 * Frames as the daemon writes them (daemon/replay/lane/replay-frame.ts: `id:
 * N`, `event: replay`, one `data:` line) are read by a loop over their bytes
 * with one native search each; any other block (a state, a comment, several
 * data lines, other fields) goes to the general parser, whose messages are
 * the reference (test/unit/replay-lines.test.ts).
 */
import { EVENT_ID_DIGITS } from '../core/replay/event-id';
import { BLOCK_END, completeBlock, NEWLINE, parseBlock, type SseMessage } from './sse-client';

/** What one read completed. */
export interface ReplayRead {
  /**
   * The replay events' data, each then a newline, in order: a view of a
   * buffer that the next push writes over, unless `keep()` was called.
   */
  lines: Buffer;
  /** where the last line starts in `lines` (-1: none) */
  lastLine: number;
  /** the id of the read's last replay event that had one (undefined: none did) */
  lastId: string | undefined;
  /** the other messages, in order, their data decoded */
  others: SseMessage[];
}

const ZERO = 48;
const NINE = 57;
const ID = Buffer.from('id: ');
/** what follows a replay frame's id line, up to its data */
const REPLAY_DATA = Buffer.from('event: replay\ndata: ');
/** a socket reads up to 64 KiB at a time: room for one, and a block begun before it */
const MIN_OUT = 128 << 10;

/** How far `bytes` from `at` matches `word`: its length (all of it), -1 (a byte differs) or -2 (the bytes end first). */
function match(bytes: Buffer, at: number, word: Buffer): number {
  const n = Math.min(word.length, bytes.length - at);
  for (let i = 0; i < n; i++) if (bytes[at + i] !== word[i]) return -1;
  return n === word.length ? n : -2;
}

export class ReplayLines {
  /** a block begun in an earlier read (never holding a block's end) */
  private rest: Buffer | null = null;
  private out = Buffer.allocUnsafe(MIN_OUT);
  private kept = false;
  /** the read in progress: bytes written to `out`, where the last line starts, its last id */
  private at = 0;
  private lastLine = -1;
  private lastId: string | undefined;
  /** the last id as [from, to) of the read's bytes, decoded once at its end */
  private idFrom = -1;
  private idTo = -1;

  /** The last read's lines are still held by their writer: the next read takes a new buffer. */
  keep(): void {
    this.kept = true;
  }

  push(chunk: Buffer): ReplayRead {
    // each data byte is copied at most once and each frame ends with two newlines: rest + chunk bounds it
    const most = chunk.length + (this.rest?.length ?? 0);
    if (this.kept || this.out.length < most) {
      // room for twice the read: a socket's reads vary in size, and a new buffer each time costs its faults
      this.out = Buffer.allocUnsafe(Math.max(2 * most, MIN_OUT));
      this.kept = false;
    }
    this.at = 0;
    this.lastLine = -1;
    this.lastId = undefined;
    this.idFrom = -1;
    const others: SseMessage[] = [];
    let start = 0;
    if (this.rest) {
      const joined = completeBlock(this.rest, chunk);
      if (joined.block === null) {
        this.rest = joined.rest;
        return this.read(chunk, others);
      }
      start = joined.start;
      this.general(joined.block, 0, joined.block.length - 2, others);
    }
    this.rest = null;
    while (start < chunk.length) {
      const next = this.frame(chunk, start);
      if (next >= 0) {
        start = next;
        continue;
      }
      // not a frame as the daemon writes it (or its end has not come): up to the block's end, if here
      const end = next === -1 ? chunk.indexOf(BLOCK_END, start) : -1;
      if (end === -1) {
        // a copy: the socket's buffer is written over by its next read (cli/replay-stream.ts)
        this.rest = Buffer.from(chunk.subarray(start));
        break;
      }
      this.general(chunk, start, end, others);
      start = end + 2;
    }
    return this.read(chunk, others);
  }

  private read(chunk: Buffer, others: SseMessage[]): ReplayRead {
    if (this.idFrom >= 0) this.lastId = chunk.toString('latin1', this.idFrom, this.idTo);
    return { lines: this.out.subarray(0, this.at), lastLine: this.lastLine, lastId: this.lastId, others };
  }

  /**
   * The replay frame at `start`, `id: DIGITS\nevent: replay\ndata: DATA\n\n`,
   * its data copied out: where the next block starts; -1 when the block is
   * something else, -2 when the bytes end before it does.
   */
  private frame(bytes: Buffer, start: number): number {
    const id = match(bytes, start, ID);
    if (id < 0) return id;
    const digits = start + id;
    let eol = digits;
    while (
      eol < bytes.length &&
      eol - digits <= EVENT_ID_DIGITS &&
      bytes[eol]! >= ZERO &&
      bytes[eol]! <= NINE
    )
      eol++;
    if (eol === bytes.length) return -2;
    if (eol === digits || eol - digits > EVENT_ID_DIGITS || bytes[eol] !== NEWLINE) return -1;
    const head = match(bytes, eol + 1, REPLAY_DATA);
    if (head < 0) return head;
    const data = eol + 1 + head;
    const end = bytes.indexOf(NEWLINE, data);
    // the second newline must be here to know the block ends (a frame of one data line)
    if (end === -1 || end + 1 === bytes.length) return -2;
    if (bytes[end + 1] !== NEWLINE) return -1;
    this.lastLine = this.at;
    this.at += bytes.copy(this.out, this.at, data, end + 1);
    this.idFrom = digits;
    this.idTo = eol;
    return end + 2;
  }

  /** Any other block, [start, end) of `bytes`, read by the general parser. */
  private general(bytes: Buffer, start: number, end: number, others: SseMessage[]): void {
    const message = parseBlock(bytes, start, end);
    if (!message) return;
    if (message.event !== 'replay') {
      others.push({ ...message, data: message.data.toString('utf8') });
      return;
    }
    this.lastLine = this.at;
    this.at += message.data.copy(this.out, this.at);
    this.out[this.at++] = NEWLINE;
    if (message.id !== undefined) {
      this.lastId = message.id;
      this.idFrom = -1;
    }
  }
}
