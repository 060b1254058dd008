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

function mysqlPacket(command: number, text: string | Buffer, sequence = 0): Buffer {
  const body = Buffer.concat([Buffer.from([command]), typeof text === 'string' ? bytes(text) : text]);
  const head = Buffer.from([body.length & 0xff, (body.length >> 8) & 0xff, body.length >> 16, sequence]);
  return Buffer.concat([head, body]);
}

/** PostgreSQL's start-up packet (protocol 3.0) with its user and, if given, its database. */
function pgStartup(user: string, database?: string): Buffer {
  const params = bytes(`user\0${user}\0${database ? `database\0${database}\0` : ''}\0`);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + params.length, 0);
  head.writeUInt32BE(196608, 4);
  return Buffer.concat([head, params]);
}

/** MySQL's HandshakeResponse41 as mysql2 and PyMySQL send it (protocol 4.1, secure auth, a database). */
function mysqlLogin(user: string, database: string): Buffer {
  const fixed = Buffer.alloc(32);
  fixed.writeUInt32LE(0x0200 | 0x8000 | 0x8, 0);
  fixed.writeUInt32LE(1 << 24, 4);
  fixed[8] = 33;
  const body = Buffer.concat([
    fixed.subarray(0, 32),
    bytes(`${user}\0`),
    Buffer.from([20]),
    Buffer.alloc(20, 7),
    bytes(`${database}\0`),
  ]);
  const head = Buffer.from([body.length & 0xff, body.length >> 8, 0, 1]);
  return Buffer.concat([head, body]);
}

/** A statement command of MySQL's binary protocol (COM_STMT_EXECUTE 0x17, …) naming statement `id`. */
function mysqlStatement(command: number, id: number): Buffer {
  const body = Buffer.alloc(9);
  body.writeUInt32LE(id, 0);
  return mysqlPacket(command, body);
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
    expect(requestShape(pgStartup('app', 'shop'))).toBe('pg startup user=app database=shop');
    // without a database, the server takes the user's name
    expect(requestShape(pgStartup('app'))).toBe('pg startup user=app database=app');
    // a Bind with no connection to name its statement
    expect(requestShape(pgMessage('B', Buffer.alloc(10)))).toBe('pg B (unknown statement)');
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

describe('keys of statements, per connection', () => {
  const { RequestKeys } = nativeAddon();
  const prepare = (sql: string) => mysqlPacket(0x16, sql);

  it("keys MySQL's execute by the statement the connection prepared under its id, not by the id", () => {
    const keys = new RequestKeys();
    // connection a prepares the slow query first (id 1), b the fast update first (so the slow is id 2)
    keys.key('a', mysqlLogin('app', 'shop'));
    keys.key('b', mysqlLogin('app', 'shop'));
    keys.key('a', prepare('SELECT SLEEP(1.5)'));
    keys.key('a', prepare('UPDATE orders SET n = n + 1 WHERE id = 7'));
    keys.key('b', prepare('UPDATE orders SET n = n + 1 WHERE id = 8'));
    keys.key('b', prepare('SELECT SLEEP(2)'));
    const slowA = keys.key('a', mysqlStatement(0x17, 1));
    const fastA = keys.key('a', mysqlStatement(0x17, 2));
    expect(keys.key('b', mysqlStatement(0x17, 2))).toBe(slowA);
    expect(keys.key('b', mysqlStatement(0x17, 1))).toBe(fastA);
    expect(fastA).not.toBe(slowA);
    // an execute is not its prepare, nor a plain query of the same text
    expect(slowA).not.toBe(requestKey(prepare('SELECT SLEEP(1)')));
    expect(slowA).not.toBe(requestKey(mysqlPacket(0x03, 'SELECT SLEEP(1)')));
    // reset and close name it too
    expect(keys.key('a', mysqlStatement(0x1a, 1))).not.toBe(keys.key('a', mysqlStatement(0x1a, 2)));
  });

  it('never guesses: a connection whose login was not seen, an id never prepared, a new login', () => {
    const keys = new RequestKeys();
    const unknown = requestKey(mysqlStatement(0x17, 1));
    expect(requestShape(mysqlStatement(0x17, 1))).toBe('mysql execute (unknown statement)');
    // prepares counted from the middle of a connection would give the wrong ids
    keys.key('mid', prepare('SELECT SLEEP(1.5)'));
    expect(keys.key('mid', mysqlStatement(0x17, 1))).toBe(unknown);
    keys.key('c', mysqlLogin('app', 'shop'));
    keys.key('c', prepare('SELECT 1'));
    expect(keys.key('c', mysqlStatement(0x17, 9))).toBe(unknown);
    expect(keys.key('c', mysqlStatement(0x17, 1))).not.toBe(unknown);
    // the fd's next connection starts over
    keys.key('c', mysqlLogin('app', 'shop'));
    expect(keys.key('c', mysqlStatement(0x17, 1))).toBe(unknown);
    // SQL's PREPARE takes an id too: the protocol's prepare after it is id 2
    keys.key('c', mysqlPacket(0x03, 'PREPARE s FROM "SELECT 2"'));
    keys.key('c', prepare('SELECT SLEEP(1.5)'));
    keys.key('d', mysqlLogin('app', 'shop'));
    keys.key('d', prepare('SELECT SLEEP(3)'));
    expect(keys.key('c', mysqlStatement(0x17, 2))).toBe(keys.key('d', mysqlStatement(0x17, 1)));
  });

  it("keys PostgreSQL's Bind, Describe and Execute by the statement a Parse named", () => {
    const keys = new RequestKeys();
    const parse = (name: string, sql: string) =>
      pgMessage('P', Buffer.concat([bytes(`${name}\0${sql}\0`), Buffer.alloc(2)]));
    const bind = (portal: string, statement: string) =>
      pgMessage('B', Buffer.concat([bytes(`${portal}\0${statement}\0`), Buffer.alloc(6)]));
    keys.key('a', pgStartup('app', 'shop'));
    keys.key('b', pgStartup('app', 'shop'));
    // connection a names the statements one way, b the other
    const slowParse = keys.key('a', parse('s1', 'SELECT pg_sleep($1)'));
    keys.key('a', parse('s2', 'SELECT total FROM orders WHERE id = $1'));
    keys.key('b', parse('s1', 'SELECT total FROM orders WHERE id = $1'));
    keys.key('b', parse('s2', 'SELECT pg_sleep($1)'));
    const slow = keys.key('a', bind('', 's1'));
    const fast = keys.key('a', bind('p1', 's2'));
    expect(keys.key('b', bind('', 's2'))).toBe(slow);
    expect(keys.key('b', bind('', 's1'))).toBe(fast);
    expect(fast).not.toBe(slow);
    // a statement run without its Parse is not the Parse that runs it
    expect(slow).not.toBe(slowParse);
    expect(keys.key('a', pgMessage('E', bytes('p1\0\0\0\0\0')))).toBe(fast);
    expect(keys.key('a', pgMessage('D', bytes('Ss1\0')))).toBe(slow);
    // the unnamed statement is the last unnamed Parse
    keys.key('a', parse('', 'SELECT 1'));
    keys.key('b', parse('', 'SELECT 2'));
    expect(keys.key('a', bind('', ''))).toBe(keys.key('b', bind('', '')));
    // a name never parsed on this connection, or on another one
    expect(keys.key('c', bind('', 's1'))).toBe(requestKey(bind('', 's1')));
    expect(keys.key('a', bind('', 'other'))).toBe(requestKey(bind('', 'other')));
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
