/**
 * How a request is recognised from its first bytes (native/capture/request_key.cc), the key `replay --exec`
 * matches a response to its request on: literal values never tell two requests apart, commands and
 * statements always do. Bytes are those real clients send (redis-py, node-redis, libpq, curl).
 */
import { nativeAddon } from '../../core/native/addon';

const { requestKey, requestShape } = nativeAddon();
const bytes = (text: string) => Buffer.from(text, 'latin1');
const resp = (...args: string[]) =>
  bytes(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);

function pgMessage(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeUInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

function mysqlPacket(command: number, text: string): Buffer {
  const body = Buffer.concat([Buffer.from([command]), bytes(text)]);
  const head = Buffer.from([body.length & 0xff, (body.length >> 8) & 0xff, body.length >> 16, 0]);
  return Buffer.concat([head, body]);
}

describe('request shapes', () => {
  it('names a TLS record by its type only (its plaintext is out of reach): equal ones match by order', () => {
    const record = (type: number, length: number, first = 0) =>
      Buffer.concat([
        Buffer.from([type, 3, 3, length >> 8, length & 0xff, first]),
        Buffer.alloc(length - 1, 0xa5),
      ]);
    // a ClientHello record says TLS 1.0 in its header, whatever it negotiates
    const hello = record(0x16, 512, 1);
    hello[2] = 1;
    expect(requestShape(hello)).toBe('tls client_hello');
    expect(requestShape(record(0x16, 40, 20))).toBe('tls handshake');
    expect(requestShape(record(0x14, 1, 1))).toBe('tls change_cipher_spec');
    expect(requestShape(record(0x15, 2))).toBe('tls alert');
    // application data of any size and bytes is one request shape; never mistaken for MySQL's
    // length-and-command framing, which a 23-byte record's header resembles
    expect(requestShape(record(0x17, 23, 0x17))).toBe('tls application_data');
    expect(requestKey(record(0x17, 141, 0x42))).toBe(requestKey(record(0x17, 300, 0x99)));
    expect(requestShape(Buffer.from([0x17, 3, 3, 0, 0]))).toBe('unknown');
  });

  it('names a Redis command without its arguments, and a container command with its subcommand', () => {
    expect(requestShape(resp('GET', 'user:1'))).toBe('redis GET');
    expect(requestShape(resp('get', 'user:2'))).toBe('redis GET');
    expect(requestShape(resp('PING'))).toBe('redis PING');
    expect(requestShape(resp('CLIENT', 'SETNAME', 'worker-1'))).toBe('redis CLIENT SETNAME');
    expect(requestShape(bytes('PING\r\n'))).toBe('line PING');
  });

  it('normalises PostgreSQL queries as pg_stat_statements does, for Query and Parse', () => {
    const query = (sql: string) => pgMessage('Q', bytes(`${sql}\0`));
    expect(requestShape(query("SELECT * FROM orders WHERE id = 42 AND note = 'it''s'"))).toBe(
      'pg query SELECT * FROM orders WHERE id = ? AND note = ?',
    );
    expect(requestShape(query('SELECT  *\n FROM orders WHERE id = 7'))).toBe(
      'pg query SELECT * FROM orders WHERE id = ?',
    );
    // identifiers with digits and placeholders stay
    expect(requestShape(query('SELECT col2 FROM t1 WHERE a = $1'))).toBe(
      'pg query SELECT col2 FROM t1 WHERE a = $1',
    );
    const parse = pgMessage('P', bytes('stmt_3\0SELECT now() + interval 5\0\0\0'));
    expect(requestShape(parse)).toBe('pg query SELECT now() + interval ?');
    const startup = Buffer.alloc(8);
    startup.writeUInt32BE(8, 0);
    startup.writeUInt32BE(196608, 4);
    expect(requestShape(startup)).toBe('pg startup');
    expect(requestShape(pgMessage('B', Buffer.alloc(10)))).toBe('pg B');
  });

  it('normalises MySQL COM_QUERY and names other commands by number', () => {
    expect(requestShape(mysqlPacket(0x03, 'select 1 from dual where x = "a"'))).toBe(
      'mysql query select ? from dual where x = "a"',
    );
    expect(requestShape(mysqlPacket(0x0e, ''))).toBe('mysql command 14');
  });

  it('names an HTTP/1.x request by method and path, without the query and with digits replaced', () => {
    expect(requestShape(bytes('GET /users/123?expand=1 HTTP/1.1\r\nHost: a\r\n\r\n'))).toBe(
      'http GET /users/?',
    );
    expect(requestShape(bytes('POST /health HTTP/1.1\r\n'))).toBe('http POST /health');
    expect(requestShape(bytes('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'))).toBe('http2');
  });

  it('calls anything else unknown, and a cut-short request keeps the shape of its whole', () => {
    expect(requestShape(Buffer.from([0x00, 0xff, 0x13, 0x37, 0x42, 0x01]))).toBe('unknown');
    expect(requestShape(Buffer.alloc(0))).toBe('unknown');
    const long = pgMessage('Q', bytes(`SELECT * FROM t WHERE name = '${'x'.repeat(200)}'\0`));
    expect(requestShape(long.subarray(0, 128))).toBe(requestShape(long.subarray(0, 100)));
  });
});

describe('request keys', () => {
  it('are equal for equal shapes, differ for different ones, and are never 0', () => {
    expect(requestKey(resp('GET', 'a'))).toBe(requestKey(resp('GET', 'bbbbbbbbbb')));
    expect(requestKey(resp('GET', 'a'))).not.toBe(requestKey(resp('PING')));
    expect(requestKey(bytes('GET /health HTTP/1.1\r\n'))).not.toBe(
      requestKey(bytes('GET /api HTTP/1.1\r\n')),
    );
    for (const sample of [resp('GET', 'a'), Buffer.alloc(0), bytes('GET / HTTP/1.1\r\n')])
      expect(requestKey(sample)).toBeGreaterThan(0);
  });

  it('refuses what is not bytes', () => {
    expect(() => requestKey('GET' as unknown as Uint8Array)).toThrow(/Uint8Array/);
  });
});
