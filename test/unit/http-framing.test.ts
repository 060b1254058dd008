import { BodyReader } from '../../cli/http-body';
import {
  bodyFraming,
  HeadReader,
  HttpProtocolError,
  MAX_HEAD_BYTES,
  type ResponseHead,
} from '../../cli/http-head';

const bytes = (text: string) => Buffer.from(text, 'latin1');

/** What a head reader makes of `chunks`: the head and the bytes after it (null: not ended). */
function readHead(chunks: Buffer[]): { head: ResponseHead; rest: string } | null {
  const reader = new HeadReader();
  let rest: Buffer[] | null = null;
  let head: ResponseHead | null = null;
  for (const chunk of chunks) {
    if (rest) rest.push(chunk);
    else {
      const read = reader.push(chunk);
      if (read) {
        head = read.head;
        rest = [read.rest];
      }
    }
  }
  return head && rest ? { head, rest: Buffer.concat(rest).toString('latin1') } : null;
}

/** A body read by a BodyReader from `chunks`: its bytes, and after how many of them it ended (-1: not). */
function readBody(
  framing: Parameters<typeof bodyFraming>[0],
  chunks: Buffer[],
): { body: string; endedAt: number } {
  const reader = new BodyReader(bodyFraming(framing));
  const body: Buffer[] = [];
  let endedAt = -1;
  chunks.forEach((chunk, i) => {
    body.push(Buffer.from(reader.push(chunk)));
    if (reader.ended && endedAt === -1) endedAt = i;
  });
  return { body: Buffer.concat(body).toString('latin1'), endedAt };
}

const headOf = (headers: [string, string][], status = 200): ResponseHead => ({
  status,
  headers: new Map(
    headers.reduce<[string, string[]][]>((all, [name, value]) => {
      const found = all.find(([n]) => n === name);
      if (found) found[1].push(value);
      else all.push([name, [value]]);
      return all;
    }, []),
  ),
});

/** every way of cutting `whole` in two, and in reads of one byte */
function cuts(whole: Buffer): Buffer[][] {
  const all: Buffer[][] = [];
  for (let cut = 0; cut <= whole.length; cut++) all.push([whole.subarray(0, cut), whole.subarray(cut)]);
  all.push([...whole].map((byte) => Buffer.from([byte])));
  return all;
}

describe('HeadReader', () => {
  const response = bytes(
    'HTTP/1.1 100 Continue\r\n\r\n' +
      'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Twice:  a \r\nx-twice: b\r\nEmpty:\r\n\r\n' +
      'id: 1\n\n',
  );

  it('reads the final head and the bytes after it, wherever the reads are cut, skipping an interim 1xx', () => {
    for (const chunks of cuts(response)) {
      const read = readHead(chunks);
      expect(read).not.toBeNull();
      expect(read!.head.status).toBe(200);
      expect([...read!.head.headers]).toEqual([
        ['content-type', ['text/event-stream']],
        ['x-twice', ['a', 'b']],
        ['empty', ['']],
      ]);
      expect(read!.rest).toBe('id: 1\n\n');
    }
  });

  it('waits for a head not ended, and holds no view of a buffer written over', () => {
    const reader = new HeadReader();
    const shared = Buffer.from('HTTP/1.1 404 Not');
    expect(reader.push(shared)).toBeNull();
    shared.fill(0x58);
    const read = reader.push(bytes(' Found\r\ncontent-length: 2\r\n\r\n{}'));
    expect(read?.head.status).toBe(404);
    expect(read?.rest.toString()).toBe('{}');
  });

  it.each([
    ['not HTTP', 'SSH-2.0-OpenSSH\r\n\r\n', /not an HTTP\/1.x status line/],
    ['HTTP/2', 'HTTP/2 200\r\n\r\n', /not an HTTP\/1.x status line/],
    ['a status of two digits', 'HTTP/1.1 20 OK\r\n\r\n', /status line/],
    ['a folded header', 'HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n', /a bad header line/],
    ['a space before the colon', 'HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n', /a bad header line/],
    ['a line without a colon', 'HTTP/1.1 200 OK\r\nnope\r\n\r\n', /a bad header line/],
    ['a bare LF inside the head', 'HTTP/1.1 200 OK\r\nA: b\nC: d\r\n\r\n', /control character/],
    ['a switch of protocols', 'HTTP/1.1 101 Switching Protocols\r\n\r\n', /switched protocols/],
  ])('refuses %s', (_what, text, message) => {
    expect(() => new HeadReader().push(bytes(text))).toThrow(message);
    expect(() => new HeadReader().push(bytes(text))).toThrow(HttpProtocolError);
  });

  it('refuses a head longer than it reads, ended or not', () => {
    const long = `HTTP/1.1 200 OK\r\nX: ${'a'.repeat(MAX_HEAD_BYTES)}`;
    const reader = new HeadReader();
    expect(() => {
      for (let at = 0; at < long.length; at += 1000) reader.push(bytes(long.slice(at, at + 1000)));
    }).toThrow(/a head of over/);
    expect(() => new HeadReader().push(bytes(`${long}\r\n\r\n`))).toThrow(/a head of over/);
  });
});

describe('bodyFraming', () => {
  it.each([
    ['nothing: up to the connection’s end', [], { kind: 'close' }],
    ['a length', [['content-length', '12']], { kind: 'length', length: 12 }],
    [
      'the same length twice',
      [
        ['content-length', '5, 5'],
        ['content-length', '5'],
      ],
      { kind: 'length', length: 5 },
    ],
    ['chunked', [['transfer-encoding', 'Chunked']], { kind: 'chunked' }],
    ['identity content', [['content-encoding', 'identity']], { kind: 'close' }],
  ] as [string, [string, string][], unknown][])('%s', (_what, headers, framing) => {
    expect(bodyFraming(headOf(headers))).toEqual(framing);
  });

  it('reads no body after a 204 or a 304', () => {
    expect(bodyFraming(headOf([['content-length', '9']], 204))).toEqual({ kind: 'length', length: 0 });
    expect(bodyFraming(headOf([], 304))).toEqual({ kind: 'length', length: 0 });
  });

  it.each([
    ['a transfer coding other than chunked', [['transfer-encoding', 'gzip, chunked']], /reads chunked alone/],
    [
      'chunked twice',
      [
        ['transfer-encoding', 'chunked'],
        ['transfer-encoding', 'chunked'],
      ],
      /reads chunked alone/,
    ],
    ['a transfer coding not ending in chunked', [['transfer-encoding', 'gzip']], /reads chunked alone/],
    [
      'both framings',
      [
        ['transfer-encoding', 'chunked'],
        ['content-length', '3'],
      ],
      /both/,
    ],
    [
      'two lengths',
      [
        ['content-length', '3'],
        ['content-length', '4'],
      ],
      /Content-Length "3, 4"/,
    ],
    ['a length not a number', [['content-length', '0x10']], /Content-Length/],
    ['a negative length', [['content-length', '-1']], /Content-Length/],
    ['a compressed body', [['content-encoding', 'gzip']], /encoded gzip/],
  ] as [string, [string, string][], RegExp][])('refuses %s', (_what, headers, message) => {
    expect(() => bodyFraming(headOf(headers))).toThrow(message);
  });
});

describe('BodyReader', () => {
  it('hands a body up to the connection’s end over as read, the same bytes, no copy', () => {
    const reader = new BodyReader({ kind: 'close' });
    const read = bytes('id: 1\n\n');
    expect(reader.push(read)).toBe(read);
    expect(reader.ended).toBe(false);
    expect(reader.endsWithConnection).toBe(true);
  });

  it('reads a length wherever the reads are cut, and drops what follows it', () => {
    const whole = bytes('0123456789trailing');
    for (const chunks of cuts(whole)) {
      const read = readBody(headOf([['content-length', '10']]), chunks);
      expect(read.body).toBe('0123456789');
      // it ends with the read that brings its tenth byte
      let seen = 0;
      const ending = chunks.findIndex((chunk) => (seen += chunk.length) >= 10);
      expect(read.endedAt).toBe(ending);
    }
  });

  const chunked = bytes(
    '5\r\nid: 1\r\n' +
      '1A;name=value;other="x\\"y"\r\n' +
      '\n\nevent: replay\ndata: {}\n\n\r\n' +
      'a\r\n0123456789\r\n' +
      '0\r\nTrailer-One: 1\r\nTrailer-Two: 2\r\n\r\n' +
      'after the end',
  );
  const decoded = 'id: 1\n\nevent: replay\ndata: {}\n\n0123456789';

  it('decodes chunks (sizes in either case, extensions, trailers) wherever the reads are cut', () => {
    const end = chunked.length - 'after the end'.length;
    for (const chunks of cuts(chunked)) {
      const read = readBody(headOf([['transfer-encoding', 'chunked']]), chunks);
      expect(read.body).toBe(decoded);
      let seen = 0;
      expect(read.endedAt).toBe(chunks.findIndex((chunk) => (seen += chunk.length) >= end));
    }
    // and reads of every size from one byte
    for (let size = 1; size < chunked.length; size++) {
      const chunks: Buffer[] = [];
      for (let at = 0; at < chunked.length; at += size) chunks.push(chunked.subarray(at, at + size));
      expect(readBody(headOf([['transfer-encoding', 'chunked']]), chunks).body).toBe(decoded);
    }
  });

  it('is not ended by a body cut before its last chunk', () => {
    const cut = chunked.subarray(0, chunked.indexOf('0\r\n\r\n') + 3);
    expect(readBody(headOf([['transfer-encoding', 'chunked']]), [cut]).endedAt).toBe(-1);
  });

  it.each([
    ['a size not hex', 'g\r\nx\r\n0\r\n\r\n', /a bad chunk size/],
    ['no size', '\r\nx\r\n', /a bad chunk size/],
    ['a size of 14 digits', `${'1'.repeat(14)}\r\n`, /a bad chunk size/],
    ['a size line ended by a bare LF', '1\nx\r\n', /a bad chunk size/],
    ['data longer than its size', '1\r\nxy\r\n0\r\n\r\n', /not followed by CRLF/],
    ['data ended by a bare LF', '1\r\nx\n0\r\n\r\n', /not followed by CRLF/],
    ['an extension ended by a bare LF', '1;a\nx\r\n', /bare LF/],
    ['a trailer ended by a bare LF', '0\r\nA: b\n\r\n', /bare LF/],
    ['an end ended by a bare LF', '0\r\n\n', /bare LF/],
  ])('refuses %s', (_what, text, message) => {
    const reader = new BodyReader({ kind: 'chunked' });
    expect(() => reader.push(bytes(text))).toThrow(message);
  });
});
