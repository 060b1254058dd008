/**
 * A response body's bytes out of a socket's reads, as its head frames it
 * (cli/http-head.ts): up to the connection's end (the daemon's event stream:
 * each read is the body as it is, no copy), a length, or chunks, whose
 * sizes, extensions and trailers may be cut anywhere between reads.
 */
import { HttpProtocolError, type BodyFraming } from './http-head';

const CR = 13;
const LF = 10;
const SEMICOLON = 59;
/** a chunk size of up to 2^52 bytes: more digits are refused rather than rounded */
const MAX_SIZE_DIGITS = 13;

const enum Chunked {
  Size,
  Extension,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerStart,
  TrailerLine,
  TrailerLineLf,
  TrailerEndLf,
}

function hexValue(byte: number): number {
  if (byte >= 48 && byte <= 57) return byte - 48;
  const lower = byte | 0x20;
  return lower >= 97 && lower <= 102 ? lower - 87 : -1;
}

export class BodyReader {
  private done = false;
  /** bytes of the body (length) or of the chunk (chunked) still to come */
  private remaining = 0;
  private state = Chunked.Size;
  private digits = 0;

  constructor(private readonly framing: BodyFraming) {
    if (framing.kind === 'length') {
      this.remaining = framing.length;
      this.done = framing.length === 0;
    }
  }

  /** Whether the body has ended (a body up to the connection's end: never, until it ends). */
  get ended(): boolean {
    return this.done;
  }

  /** Whether the connection's end is the body's: a body framed by nothing else. */
  get endsWithConnection(): boolean {
    return this.framing.kind === 'close';
  }

  /**
   * The body's bytes in `bytes`: a view of them when they are one run (the
   * event stream's every read), else a copy; what follows the body's end is
   * not the body and is dropped (the connection closes after it).
   */
  push(bytes: Buffer): Buffer {
    if (this.done) return bytes.subarray(0, 0);
    if (this.framing.kind === 'close') return bytes;
    if (this.framing.kind === 'length') {
      const body = bytes.subarray(0, Math.min(this.remaining, bytes.length));
      this.remaining -= body.length;
      this.done = this.remaining === 0;
      return body;
    }
    const pieces: Buffer[] = [];
    for (let at = 0; at < bytes.length && !this.done;) {
      if (this.state === Chunked.Data) {
        const piece = bytes.subarray(at, at + Math.min(this.remaining, bytes.length - at));
        pieces.push(piece);
        at += piece.length;
        this.remaining -= piece.length;
        if (this.remaining === 0) this.state = Chunked.DataCr;
        continue;
      }
      this.step(bytes[at++]!);
    }
    return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
  }

  /** One byte of a chunk's framing (its size line, the CRLF after its data, the trailer); data is taken as a run, in push. */
  private step(byte: number): void {
    switch (this.state) {
      case Chunked.Size: {
        const digit = hexValue(byte);
        if (digit >= 0 && this.digits < MAX_SIZE_DIGITS) {
          this.remaining = this.remaining * 16 + digit;
          this.digits++;
        } else if (this.digits > 0 && byte === CR) this.state = Chunked.SizeLf;
        else if (this.digits > 0 && byte === SEMICOLON) this.state = Chunked.Extension;
        else throw new HttpProtocolError('a bad chunk size');
        return;
      }
      case Chunked.Extension:
        // an extension's bytes are skipped; a bare LF in it is not a line's end
        if (byte === CR) this.state = Chunked.SizeLf;
        else if (byte === LF) throw new HttpProtocolError('a chunk extension ended by a bare LF');
        return;
      case Chunked.SizeLf:
        this.expect(byte, LF, 'a chunk size line not ended by CRLF');
        this.digits = 0;
        this.state = this.remaining === 0 ? Chunked.TrailerStart : Chunked.Data;
        return;
      case Chunked.DataCr:
        this.expect(byte, CR, "a chunk's data not followed by CRLF");
        this.state = Chunked.DataLf;
        return;
      case Chunked.DataLf:
        this.expect(byte, LF, "a chunk's data not followed by CRLF");
        this.state = Chunked.Size;
        return;
      case Chunked.TrailerStart:
        this.state = byte === CR ? Chunked.TrailerEndLf : Chunked.TrailerLine;
        if (byte === LF) throw new HttpProtocolError('a trailer line ended by a bare LF');
        return;
      case Chunked.TrailerLine:
        if (byte === CR) this.state = Chunked.TrailerLineLf;
        else if (byte === LF) throw new HttpProtocolError('a trailer line ended by a bare LF');
        return;
      case Chunked.TrailerLineLf:
        this.expect(byte, LF, 'a trailer line not ended by CRLF');
        this.state = Chunked.TrailerStart;
        return;
      case Chunked.TrailerEndLf:
        this.expect(byte, LF, 'a chunked body not ended by CRLF');
        this.done = true;
        return;
    }
  }

  private expect(byte: number, wanted: number, problem: string): void {
    if (byte !== wanted) throw new HttpProtocolError(problem);
  }
}
