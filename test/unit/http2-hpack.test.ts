/**
 * HPACK and HTTP/2 request frames: RFC 7541's own examples, the dynamic
 * table across requests, Huffman strings, CONTINUATION, a lost table, and
 * the bytes a real encoder (Node's nghttp2) sends for multiplexed streams.
 */
import { connect, constants } from 'node:http2';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { HpackDecoder } from '../../agent/ingest/http2/hpack';
import { HpackError } from '../../agent/ingest/http2/hpack-error';
import { decodeHuffman, huffmanCode } from '../../agent/ingest/http2/huffman';
import { PREFACE, RequestFrames, type StreamHeaders } from '../../agent/ingest/http2/request-frames';
import { grpcTraceBinToTraceparent, streamContext } from '../../agent/ingest/http2/stream-context';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE}-00f067aa0ba902b7-01`;
/** what a context from TRACEPARENT carries besides its ids */
const PARENT = { parentSpanId: '00f067aa0ba902b7', traceFlags: 1 };

/** A frame: 24-bit length, type, flags, stream id. */
function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

/** A literal without indexing, new name, raw strings (lengths < 127). */
function literal(name: string, value: string): Buffer {
  return Buffer.concat([
    Buffer.from([0x00, name.length]),
    Buffer.from(name),
    Buffer.from([value.length]),
    Buffer.from(value),
  ]);
}

describe('Huffman (RFC 7541 Appendix B)', () => {
  it('builds the canonical code of the RFC', () => {
    expect(huffmanCode('0'.charCodeAt(0))).toEqual([0x0, 5]);
    expect(huffmanCode('a'.charCodeAt(0))).toEqual([0x3, 5]);
    expect(huffmanCode(' '.charCodeAt(0))).toEqual([0x14, 6]);
    expect(huffmanCode(0)).toEqual([0x1ff8, 13]);
    expect(huffmanCode(255)).toEqual([0x3ffffee, 26]);
    expect(huffmanCode(256)).toEqual([0x3fffffff, 30]);
  });

  it('decodes the RFC examples', () => {
    expect(decodeHuffman(hex('f1e3 c2e5 f23a 6ba0 ab90 f4ff')).toString()).toBe('www.example.com');
    expect(decodeHuffman(hex('a8eb 1064 9cbf')).toString()).toBe('no-cache');
    expect(decodeHuffman(hex('25a8 49e9 5bb8 e8b4 bf')).toString()).toBe('custom-value');
    expect(decodeHuffman(hex('6402')).toString()).toBe('302');
  });

  it('rejects bad padding and EOS', () => {
    // '0' is 00000; padding with zeros instead of ones
    expect(() => decodeHuffman(Buffer.from([0x00]))).toThrow(HpackError);
    // EOS: 30 one bits
    expect(() => decodeHuffman(Buffer.from([0xff, 0xff, 0xff, 0xff]))).toThrow(HpackError);
  });
});

describe('HpackDecoder', () => {
  it('keeps the dynamic table across requests: an entry indexed on one is referenced on the next (RFC 7541 C.4)', () => {
    const d = new HpackDecoder();
    expect(d.decode(hex('8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
    ]);
    expect(d.entries()).toEqual([[':authority', 'www.example.com']]);
    // 0xbe: index 62, the entry the first request added
    expect(d.decode(hex('8286 84be 5886 a8eb 1064 9cbf'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'http'],
      [':path', '/'],
      [':authority', 'www.example.com'],
      ['cache-control', 'no-cache'],
    ]);
    expect(d.decode(hex('8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf'))).toEqual([
      [':method', 'GET'],
      [':scheme', 'https'],
      [':path', '/index.html'],
      [':authority', 'www.example.com'],
      ['custom-key', 'custom-value'],
    ]);
    expect(d.entries()).toEqual([
      ['custom-key', 'custom-value'],
      ['cache-control', 'no-cache'],
      [':authority', 'www.example.com'],
    ]);
  });

  it('evicts by size and honours table size updates', () => {
    const d = new HpackDecoder();
    // size update to 0 empties the table; a reference to 62 is then an error
    d.decode(hex('8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff'));
    expect(d.decode(hex('20 82'))).toEqual([[':method', 'GET']]);
    expect(d.entries()).toEqual([]);
    expect(() => d.decode(hex('be'))).toThrow(/past the dynamic table/);
    // a size update above the announced limit
    expect(() => new HpackDecoder().decode(hex('3fe21f'))).toThrow(/exceeds 4096/);
  });

  it('rejects truncated blocks with a clear error', () => {
    expect(() => new HpackDecoder().decode(hex('41 8c f1e3'))).toThrow(/runs past the header block/);
    expect(() => new HpackDecoder().decode(hex('ff'))).toThrow(/ends inside an integer/);
    expect(() => new HpackDecoder().decode(hex('80'))).toThrow(/index 0/);
  });
});

describe('RequestFrames', () => {
  it('assembles a traceparent split across CONTINUATION frames', () => {
    const block = Buffer.concat([
      hex('8286 84'),
      literal('traceparent', TRACEPARENT),
      literal('x-request-id', 'split-1'),
    ]);
    const cut1 = 20;
    const cut2 = 40;
    const r = new RequestFrames();
    const bytes = Buffer.concat([
      PREFACE,
      frame(4, 0, 0, Buffer.alloc(0)), // SETTINGS
      frame(1, 0x1, 1, block.subarray(0, cut1)), // HEADERS, END_STREAM, no END_HEADERS
      frame(9, 0, 1, block.subarray(cut1, cut2)),
      frame(9, 0x4, 1, block.subarray(cut2)),
    ]);
    // fed in pieces that split frames too
    const out: StreamHeaders[] = [];
    for (let i = 0; i < bytes.length; i += 7) out.push(...r.feed(bytes.subarray(i, i + 7)));
    expect(r.lost).toBeNull();
    expect(out).toHaveLength(1);
    expect(out[0]!.streamId).toBe(1);
    expect(streamContext(out[0]!.headers)).toEqual({ traceId: TRACE, transactionId: 'split-1', ...PARENT });
  });

  it('skips padding and priority in HEADERS', () => {
    const block = Buffer.concat([hex('82'), literal('traceparent', TRACEPARENT)]);
    const payload = Buffer.concat([Buffer.from([3]), Buffer.alloc(5), block, Buffer.alloc(3)]);
    const out = new RequestFrames().feed(Buffer.concat([PREFACE, frame(1, 0x4 | 0x8 | 0x20, 3, payload)]));
    expect(out.map((s) => [s.streamId, streamContext(s.headers)])).toEqual([
      [3, { traceId: TRACE, transactionId: TRACE, ...PARENT }],
    ]);
  });

  it('loses a connection it joined mid-way, or whose block it cannot follow, and yields nothing after', () => {
    const mid = new RequestFrames();
    expect(mid.feed(frame(1, 0x4, 1, hex('82')))).toEqual([]);
    expect(mid.lost).toMatch(/mid-connection/);

    const interrupted = new RequestFrames();
    interrupted.feed(Buffer.concat([PREFACE, frame(1, 0, 1, hex('82')), frame(0, 0, 1, Buffer.from('x'))]));
    expect(interrupted.lost).toMatch(/interrupted/);
    // a later, valid block is not decoded: the table may have changed meanwhile
    expect(interrupted.feed(frame(1, 0x4, 3, hex('82')))).toEqual([]);

    const badIndex = new RequestFrames();
    expect(badIndex.feed(Buffer.concat([PREFACE, frame(1, 0x4, 1, hex('be'))]))).toEqual([]);
    expect(badIndex.lost).toMatch(/past the dynamic table/);
  });
});

describe('stream contexts', () => {
  it('reads grpc-trace-bin when there is no traceparent', () => {
    const bin = Buffer.concat([
      Buffer.from([0, 0]),
      Buffer.from(TRACE, 'hex'),
      Buffer.from([1]),
      hex('00f067aa0ba902b7'),
      Buffer.from([2, 1]),
    ]);
    expect(grpcTraceBinToTraceparent(bin.toString('base64'))).toBe(TRACEPARENT);
    expect(streamContext([['grpc-trace-bin', bin.toString('base64').replace(/=+$/, '')]])).toEqual({
      traceId: TRACE,
      transactionId: TRACE,
      ...PARENT,
    });
    expect(grpcTraceBinToTraceparent(Buffer.from([1, 2, 3]).toString('base64'))).toBeNull();
    expect(streamContext([['x-request-id', 'no-trace']])).toBeNull();
    expect(streamContext([['traceparent', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`]])).toBeNull();
  });
});

describe("a real encoder (Node's nghttp2), many streams on one connection", () => {
  it('gives every multiplexed stream its own request, with Huffman and dynamic-table references', async () => {
    const received: Buffer[] = [];
    let peer: Socket | undefined;
    const server = createServer((s) => {
      peer = s;
      s.on('data', (b: Buffer) => received.push(b));
      // an empty SETTINGS, then the ack of the client's
      s.write(Buffer.concat([frame(4, 0, 0, Buffer.alloc(0)), frame(4, 1, 0, Buffer.alloc(0))]));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const client = connect(`http://127.0.0.1:${port}`);
    const n = 50;
    const traceOf = (i: number) => (i + 1).toString(16).padStart(32, 'c');
    const streams = Array.from({ length: n }, (_, i) =>
      client.request({
        [constants.HTTP2_HEADER_PATH]: `/r/${i}`,
        traceparent: `00-${traceOf(i)}-00f067aa0ba902b7-01`,
        'x-request-id': `req-${i}`,
      }),
    );
    const frames = new RequestFrames();
    const seen: StreamHeaders[] = [];
    const deadline = Date.now() + 10000;
    while (seen.length < n && Date.now() < deadline) {
      await new Promise((r) => setImmediate(r));
      for (const b of received.splice(0)) seen.push(...frames.feed(b));
    }
    for (const s of streams) s.close();
    client.destroy();
    peer?.destroy();
    server.close();
    expect(frames.lost).toBeNull();
    expect(seen).toHaveLength(n);
    // each stream id with its own request, in the order they were opened (client streams are odd)
    expect(seen.map((s) => [s.streamId, streamContext(s.headers)])).toEqual(
      Array.from({ length: n }, (_, i) => [
        2 * i + 1,
        { traceId: traceOf(i), transactionId: `req-${i}`, ...PARENT },
      ]),
    );
    // nghttp2 indexes what repeats (names, the authority): the later streams decode only through the table
    const paths = seen.map((s) => s.headers.find(([k]) => k === ':path')![1]);
    expect(paths).toEqual(Array.from({ length: n }, (_, i) => `/r/${i}`));
  });
});
