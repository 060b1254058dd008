/**
 * The request side of one HTTP/2 connection (h2c bytes a server read, or
 * the plaintext of a TLS one): frames split out of the byte stream, each
 * stream's header block assembled from HEADERS and CONTINUATION frames and
 * decoded with the connection's HPACK table. Anything kreplay cannot follow
 * exactly (no preface: it joined mid-connection; a malformed frame; an
 * undecodable block) makes the connection lost for good: from then on it
 * yields nothing, so its streams stay unattributed, never wrongly.
 */
import { HpackDecoder, type HeaderField } from './hpack';
import { HpackError } from './hpack-error';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const FRAME_HEADER = 9;
const HEADERS = 0x1;
const CONTINUATION = 0x9;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY = 0x20;
/* SETTINGS_MAX_FRAME_SIZE's ceiling: a longer length means we are not reading frames */
const MAX_FRAME = (1 << 24) - 1;
/* a header block kreplay keeps while CONTINUATIONs arrive */
const MAX_BLOCK = 256 * 1024;

export interface StreamHeaders {
  streamId: number;
  headers: HeaderField[];
}

export class RequestFrames {
  private pending = Buffer.alloc(0);
  private prefaceSeen = false;
  private block: { streamId: number; parts: Buffer[]; bytes: number } | null = null;
  private readonly hpack = new HpackDecoder();
  /** Why the connection can no longer be followed, null while it can. */
  lost: string | null = null;

  /** Feeds the next bytes of the connection, in order; returns the header lists they completed. */
  feed(bytes: Uint8Array): StreamHeaders[] {
    if (this.lost) return [];
    this.pending = this.pending.length ? Buffer.concat([this.pending, bytes]) : Buffer.from(bytes);
    const out: StreamHeaders[] = [];
    try {
      if (!this.prefaceSeen) {
        const n = Math.min(this.pending.length, PREFACE.length);
        if (!this.pending.subarray(0, n).equals(PREFACE.subarray(0, n))) {
          return this.lose('the connection did not start with the HTTP/2 preface (joined mid-connection)');
        }
        if (n < PREFACE.length) return out;
        this.prefaceSeen = true;
        this.pending = this.pending.subarray(PREFACE.length);
      }
      while (this.pending.length >= FRAME_HEADER) {
        const len = this.pending.readUIntBE(0, 3);
        if (this.pending.length < FRAME_HEADER + len) break;
        const type = this.pending[3]!;
        const flags = this.pending[4]!;
        const streamId = this.pending.readUInt32BE(5) & 0x7fffffff;
        const payload = this.pending.subarray(FRAME_HEADER, FRAME_HEADER + len);
        this.pending = this.pending.subarray(FRAME_HEADER + len);
        const done = this.frame(type, flags, streamId, payload);
        if (done) out.push(done);
      }
      if (this.pending.length >= 3 && this.pending.readUIntBE(0, 3) > MAX_FRAME)
        throw new HpackError('bad frame');
    } catch (err) {
      if (err instanceof HpackError) return this.lose(err.message);
      throw err;
    }
    return out;
  }

  private frame(type: number, flags: number, streamId: number, payload: Buffer): StreamHeaders | null {
    if (this.block && (type !== CONTINUATION || streamId !== this.block.streamId)) {
      throw new HpackError('a header block was interrupted by another frame');
    }
    if (type === HEADERS) {
      if (streamId === 0) throw new HpackError('HEADERS on stream 0');
      let start = 0;
      let end = payload.length;
      if (flags & PADDED) {
        if (!payload.length) throw new HpackError('a padded HEADERS frame is empty');
        end -= payload[0]!;
        start = 1;
      }
      if (flags & PRIORITY) start += 5;
      if (start > end) throw new HpackError('HEADERS padding exceeds its payload');
      this.block = { streamId, parts: [payload.subarray(start, end)], bytes: end - start };
    } else if (type === CONTINUATION) {
      if (!this.block) throw new HpackError('CONTINUATION without HEADERS');
      this.block.parts.push(payload);
      this.block.bytes += payload.length;
      if (this.block.bytes > MAX_BLOCK) throw new HpackError('a header block is larger than kreplay keeps');
    } else {
      return null;
    }
    if (!(flags & END_HEADERS)) return null;
    const { parts } = this.block;
    this.block = null;
    return { streamId, headers: this.hpack.decode(Buffer.concat(parts)) };
  }

  private lose(reason: string): [] {
    this.lost = reason;
    this.pending = Buffer.alloc(0);
    this.block = null;
    return [];
  }
}
