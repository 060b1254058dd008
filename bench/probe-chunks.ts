/**
 * How the replay probe (bench/replay-probe.ts) takes a stream apart: parts
 * split on a separator as chunks come, chunks kept during the play and
 * parsed after, and a key watched for across reads.
 */

/**
 * Splits a byte stream on `separator` as chunks come: `onPart` gets each
 * complete part's range in the buffer it is in, with the chunk's arrival.
 */
export class Splitter {
  private rest: Buffer | null = null;

  constructor(
    private readonly separator: Buffer | number,
    private readonly onPart: (bytes: Buffer, from: number, to: number, at: number) => void,
  ) {}

  /** A part begun in an earlier chunk is joined with its end alone, not the whole chunk (as cli/sse-client.ts's parser). */
  push(chunk: Buffer, at: number): void {
    const separator = this.separator;
    const width = typeof separator === 'number' ? 1 : separator.length;
    let start = 0;
    if (this.rest) {
      const rest = this.rest;
      // the rest holds no separator: the first one is across the two (two bytes split) or the chunk's first
      const across =
        typeof separator !== 'number' && rest[rest.length - 1] === separator[0] && chunk[0] === separator[1];
      const end = across ? 0 : chunk.indexOf(separator);
      if (end === -1) {
        this.rest = Buffer.concat([rest, chunk]);
        return;
      }
      start = across ? 1 : end + width;
      const part = Buffer.concat([rest, chunk.subarray(0, start)]);
      this.onPart(part, 0, part.length - width, at);
    }
    for (let end = chunk.indexOf(separator, start); end !== -1; end = chunk.indexOf(separator, start)) {
      this.onPart(chunk, start, end, at);
      start = end + width;
    }
    this.rest = start < chunk.length ? chunk.subarray(start) : null;
  }
}

/**
 * The chunks read during the play and their arrivals, handed to a Splitter
 * only when asked (`drain`). Each chunk's bytes are copied into one buffer
 * taken before the play, so that what the probe holds while it plays is
 * neither garbage nor external memory the collector must count: holding
 * the chunks themselves (a dense stream's 25–48 MB, 2,000–4,000 of them)
 * promoted each to the old generation and grew external memory until a
 * full collection paused the probe during the play (4–20 ms, in most SSE
 * runs), and a paused probe stamps its reads late.
 */
export class Chunks {
  /** the buffers taken, the last one being written */
  private buffers: Buffer[];
  /** bytes kept in the last buffer; a drain does not reuse them (a part begun before it points into them) */
  private used = 0;
  /** per chunk kept and not drained: its buffer, where it starts and ends, its arrival */
  private buffer: number[] = [];
  private starts: number[] = [];
  private ends: number[] = [];
  private times: number[] = [];

  /** `capacity`: bytes taken now (the prepared buffer, if one is); more is taken, twice as much, when it is full */
  constructor(
    private readonly splitter: Splitter,
    capacity = Chunks.CAPACITY,
  ) {
    const ready = Chunks.prepared?.length === capacity ? Chunks.prepared : null;
    Chunks.prepared = null;
    this.buffers = [ready ?? Buffer.alloc(capacity)];
  }

  /** A dense replay's event stream (100,001 events, ~48 MB) and what comes with it. */
  static readonly CAPACITY = 64 << 20;

  private static prepared: Buffer | null = null;

  /**
   * A buffer for the next Chunks, its pages in memory now, before the probe
   * connects or starts its child. A buffer of zeroes is not: its pages are
   * mapped at their first write, and a dense play's 9,000–12,000 faults of
   * the probe's copies (`perf record`: page faults and page clearing, a
   * quarter of its kernel time) took a core's time from the play it
   * measures. Touching 64 MiB takes tens of ms: never once a stream has
   * begun (a stream resumed after a cut takes a buffer untouched).
   */
  static prepare(capacity = Chunks.CAPACITY): void {
    Chunks.prepared = Buffer.alloc(capacity, 1);
  }

  keep(chunk: Buffer, at: number): void {
    let last = this.buffers[this.buffers.length - 1]!;
    if (this.used + chunk.length > last.length) {
      last = Buffer.alloc(Math.max(2 * last.length, chunk.length));
      this.buffers.push(last);
      this.used = 0;
    }
    chunk.copy(last, this.used);
    this.buffer.push(this.buffers.length - 1);
    this.starts.push(this.used);
    this.used += chunk.length;
    this.ends.push(this.used);
    this.times.push(at);
  }

  drain(): void {
    const { buffer, starts, ends, times, buffers } = this;
    this.buffer = [];
    this.starts = [];
    this.ends = [];
    this.times = [];
    for (let i = 0; i < starts.length; i++)
      this.splitter.push(buffers[buffer[i]!]!.subarray(starts[i], ends[i]), times[i]!);
  }
}

/**
 * Watches a byte stream, chunk by chunk, for a key, which may be split
 * across reads: it keeps the last key.length - 1 bytes seen.
 */
export class KeyWatch {
  private tail: Buffer = Buffer.alloc(0);

  constructor(private readonly key: Buffer) {}

  /** Whether the key ends in `chunk` (begun in it or in the reads before). */
  seen(chunk: Buffer): boolean {
    const keep = this.key.length - 1;
    const found =
      chunk.indexOf(this.key) !== -1 ||
      (this.tail.length > 0 && Buffer.concat([this.tail, chunk.subarray(0, keep)]).indexOf(this.key) !== -1);
    const joined = chunk.length >= keep ? chunk : Buffer.concat([this.tail, chunk]);
    this.tail = joined.subarray(Math.max(0, joined.length - keep));
    return found;
  }
}
