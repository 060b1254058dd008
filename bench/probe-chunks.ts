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
 * only when asked (`drain`): a chunk costs an array slot while it plays.
 */
export class Chunks {
  private chunks: Buffer[] = [];
  private times: number[] = [];

  constructor(private readonly splitter: Splitter) {}

  keep(chunk: Buffer, at: number): void {
    this.chunks.push(chunk);
    this.times.push(at);
  }

  drain(): void {
    const { chunks, times } = this;
    this.chunks = [];
    this.times = [];
    for (let i = 0; i < chunks.length; i++) this.splitter.push(chunks[i]!, times[i]!);
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
