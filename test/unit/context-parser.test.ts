import {
  followedByAnotherRequest,
  headEnd,
  isStartLine,
  parseHttpHead,
  parseMarker,
} from '../../agent/attribution/context-parser';

const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');

describe('parseMarker', () => {
  it.each([
    [
      'KREPLAY-CTX txn=checkout-42 trace=4bf92f3577b34da6a3ce929d0e0e4736',
      'checkout-42',
      '4bf92f3577b34da6a3ce929d0e0e4736',
    ],
    ['KREPLAY-CTX txn=a.b:c/d@e-f_g\n', 'a.b:c/d@e-f_g', null],
    ['KREPLAY-CTX trace=t1\r\n', null, 't1'],
    ['KREPLAY-CTX   trace=t1\ttxn=x1', 'x1', 't1'],
    [`KREPLAY-CTX txn=${'a'.repeat(128)}`, 'a'.repeat(128), null],
  ])('sets the context from %j', (text, txn, trace) => {
    expect(parseMarker(text)).toEqual({ kind: 'set', context: { transactionId: txn, traceId: trace } });
  });

  it.each(['KREPLAY-CTX', 'KREPLAY-CTX\n', 'KREPLAY-CTX   \n'])('clears with no fields: %j', (text) => {
    expect(parseMarker(text)).toEqual({ kind: 'clear' });
  });

  it.each([
    ['KREPLAY-CTXtxn=a', /followed by a space/],
    ['KREPLAY-CTX txn=', /1\.\.128/],
    ['KREPLAY-CTX txn', /1\.\.128/],
    [`KREPLAY-CTX txn=${'a'.repeat(129)}`, /1\.\.128/],
    ['KREPLAY-CTX txn=a b', /unknown field "b"/],
    ['KREPLAY-CTX user=bob', /unknown field "user"/],
    ['KREPLAY-CTX txn=a txn=b', /given twice/],
    ['KREPLAY-CTX txn=a,b', /1\.\.128/],
    ['KREPLAY-CTX txn=ä', /1\.\.128/],
  ])('rejects %j', (text, reason) => {
    const parsed = parseMarker(text);
    expect(parsed.kind).toBe('malformed');
    expect(parsed.kind === 'malformed' && parsed.reason).toMatch(reason);
  });

  it('reads only the first line', () => {
    expect(parseMarker('KREPLAY-CTX txn=a\nnot a field')).toEqual({
      kind: 'set',
      context: { transactionId: 'a', traceId: null },
    });
  });
});

describe('parseHttpHead', () => {
  const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

  it('takes trace_id from traceparent and transaction_id from x-request-id, names case-insensitive', () => {
    const head = `POST /pay HTTP/1.1\r\nHost: x\r\nTraceParent: ${tp}\r\nX-Request-ID: req-9\r\n\r\nbody`;
    expect(parseHttpHead(latin1(head))).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      transactionId: 'req-9',
      parentSpanId: '00f067aa0ba902b7',
      traceFlags: 1,
    });
  });

  it('uses the trace id as transaction id without x-request-id, also for responses', () => {
    expect(parseHttpHead(latin1(`HTTP/1.1 200 OK\r\ntraceparent: ${tp}\r\n\r\n`))).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      transactionId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: '00f067aa0ba902b7',
      traceFlags: 1,
    });
  });

  it('keeps the flags of an unsampled traceparent', () => {
    const head = `GET / HTTP/1.1\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00\r\n\r\n`;
    expect(parseHttpHead(latin1(head))).toMatchObject({ parentSpanId: '00f067aa0ba902b7', traceFlags: 0 });
  });

  it.each([
    '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
    '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
    'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7',
    'garbage',
  ])('ignores the malformed traceparent %j', (value) => {
    expect(parseHttpHead(latin1(`GET / HTTP/1.1\r\ntraceparent: ${value}\r\n\r\n`))).toBeNull();
  });

  it('takes an x-request-id without a (valid) traceparent as the transaction, without a trace', () => {
    expect(parseHttpHead(latin1('GET / HTTP/1.1\r\nX-Request-Id: lb-77\r\n\r\n'))).toEqual({
      traceId: null,
      transactionId: 'lb-77',
    });
    expect(
      parseHttpHead(latin1('GET / HTTP/1.1\r\ntraceparent: garbage\r\nx-request-id: lb-78\r\n\r\n')),
    ).toEqual({
      traceId: null,
      transactionId: 'lb-78',
    });
    // neither: no context; an x-request-id that is no valid value neither
    expect(parseHttpHead(latin1('GET / HTTP/1.1\r\nHost: a\r\n\r\n'))).toBeNull();
    expect(parseHttpHead(latin1('GET / HTTP/1.1\r\nx-request-id: a b\r\n\r\n'))).toBeNull();
  });

  it('ignores a traceparent after the head and a head that is not HTTP/1.x', () => {
    expect(parseHttpHead(latin1(`GET / HTTP/1.1\r\nHost: a\r\n\r\ntraceparent: ${tp}\r\n`))).toBeNull();
    expect(parseHttpHead(latin1(`GET / HTTP/2\r\ntraceparent: ${tp}\r\n\r\n`))).toBeNull();
  });
});

describe('parseHttpHead, read in place', () => {
  const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
  const START_LINE = /^(?:[A-Z]+ \S+ HTTP\/1\.[01]|HTTP\/1\.[01] \d{3}(?: .*)?)$/;
  const VALUE = /^[A-Za-z0-9._:/@-]{1,128}$/;

  /* The head's definition, spelled as split lines: what the in-place reading must answer. */
  function byLines(data: string): unknown {
    const end = data.indexOf('\r\n\r\n');
    const lines = (end === -1 ? data : data.slice(0, end)).split(/\r?\n/);
    if (!START_LINE.test(lines[0] ?? '')) return null;
    let traceparent: string | null = null;
    let requestId: string | null = null;
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === 'traceparent' && traceparent === null) traceparent = value;
      else if (name === 'x-request-id' && requestId === null) requestId = value;
    }
    const transactionId = requestId !== null && VALUE.test(requestId) ? requestId : null;
    const m = traceparent === null ? null : TRACEPARENT.exec(traceparent);
    if (!m || m[1] === 'ff' || /^0+$/.test(m[2]!) || /^0+$/.test(m[3]!))
      return transactionId === null ? null : { traceId: null, transactionId };
    return {
      traceId: m[2],
      transactionId: transactionId ?? m[2],
      parentSpanId: m[3],
      traceFlags: parseInt(m[4]!, 16),
    };
  }

  it('tells a start line as the grammar does, from its bytes', () => {
    // each line a start line's parts, each part drawn from the valid and the nearly valid
    const parts = [
      ['GET', 'M', 'get', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/1.2', 'HTTP/1.', 'HTTP/2', '', 'G\u00ff'],
      [' ', '  ', '', '\t', '\u00a0', '\u0085'],
      ['/', '/a?b', '200', '20', '2000', '', 'x\u00ffy', '/\u000b', '\r', 'HTTP/1.1'],
      [' ', '', '  ', '\u00a0'],
      ['HTTP/1.1', 'HTTP/1.0', 'HTTP/1.2', 'http/1.1', 'OK', 'Not \u0085Found', '', 'a\rb'],
      ['', '', '', ' ', '\r', 'x'],
    ];
    let seed = 4646;
    const next = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const lines = [
      'GET / HTTP/1.1',
      'HTTP/1.1 200',
      'HTTP/1.0 404 Not Found',
      'HTTP/1.1 200 ',
      'A B HTTP/1.0',
    ];
    for (let i = 0; i < 20000; i++) lines.push(parts.map((p) => p[next(p.length)]).join(''));
    const got = lines.map((line) => isStartLine(latin1(`${line}\nGET / HTTP/1.1`), line.length));
    expect(lines.filter((line, i) => got[i] !== START_LINE.test(line))).toEqual([]);
    // the generated lines hold both answers, many times
    expect(got.filter(Boolean).length).toBeGreaterThan(500);
    expect(got.filter((yes) => !yes).length).toBeGreaterThan(500);
  });

  it('answers as the split lines do, on heads made of the pieces that trip a reader', () => {
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const pieces = [
      'GET / HTTP/1.1',
      'HTTP/1.0 200 OK',
      'get / HTTP/1.1',
      '\r\n',
      '\n',
      '\r',
      '\r\n\r\n',
      ':',
      ' ',
      '\t',
      '\u00a0',
      '\u0085',
      '\u00ff',
      'TRACEPARENT: \u00a000-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\u0085',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g',
      '00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01',
      '\u2028',
      '\ufeff',
      '\u0130',
      '\u212a',
      'traceparent',
      'TraceParent',
      'traceparent ',
      'x-request-id',
      'X-Request-ID',
      'x_request_id',
      'Host',
      tp,
      ` ${tp} `,
      'ff' + tp.slice(2),
      'req-1',
      'a b',
      'x-request-id:r1',
      `traceparent:${tp}`,
      '\r\ntraceparent: ' + tp,
      '\r\nx-request-id: r2\r',
      // x-request-id values at CONTEXT_VALUE's edges, checked in place
      'a'.repeat(128),
      'b'.repeat(129),
      'A.z:0/9@_-',
      'r,3',
      'r\u00e4',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff',
      'fe-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-a0',
    ];
    // a fixed seed: the same heads every run
    let seed = 46;
    const next = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let i = 0; i < 20000; i++) {
      let head = next(3) === 0 ? '' : pieces[next(2)]!;
      for (let k = next(14); k > 0; k--) head += pieces[next(pieces.length)];
      // the kernel's bytes, as the agent once decoded them (latin1) before reading the head
      const bytes = latin1(head);
      expect([head, parseHttpHead(bytes)]).toEqual([head, byLines(bytes.toString('latin1'))]);
      expect([head, headEnd(bytes)]).toEqual([head, bytes.toString('latin1').indexOf('\r\n\r\n')]);
    }
  });
});

describe('parseHttpHead, its strings', () => {
  afterEach(() => jest.restoreAllMocks());

  /* The strings a head's parse makes: only those of the context it returns (each a request, kept with the context). */
  function stringsMade(head: string): number {
    const bytes = latin1(head);
    const toString = jest.spyOn(Buffer.prototype, 'toString');
    parseHttpHead(bytes);
    const made = toString.mock.calls.length;
    toString.mockRestore();
    return made;
  }

  it('makes no string of an x-request-id it does not keep, and none of an invalid traceparent', () => {
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    expect(stringsMade(`GET / HTTP/1.1\r\nx-request-id: not valid\r\ntraceparent: ${tp}\r\n\r\n`)).toBe(2);
    expect(stringsMade('GET / HTTP/1.1\r\nx-request-id: a,b\r\ntraceparent: 00-zz-01\r\n\r\n')).toBe(0);
    expect(stringsMade(`GET / HTTP/1.1\r\nx-request-id: ${'r'.repeat(129)}\r\n\r\n`)).toBe(0);
    // what it keeps: the request id, the trace id and the parent span
    expect(stringsMade(`GET / HTTP/1.1\r\nx-request-id: req-1\r\ntraceparent: ${tp}\r\n\r\n`)).toBe(3);
  });
});

describe('followedByAnotherRequest', () => {
  it('tells a pipelined request after a head and its content-length body from the body alone', () => {
    const get = 'GET /a HTTP/1.1\r\nHost: h\r\n\r\n';
    expect(followedByAnotherRequest(latin1(get))).toBe(false);
    expect(followedByAnotherRequest(latin1(get + get))).toBe(true);
    expect(followedByAnotherRequest(latin1(get + 'G'))).toBe(true);
    const post = 'POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello';
    expect(followedByAnotherRequest(latin1(post))).toBe(false);
    expect(followedByAnotherRequest(latin1(post + get))).toBe(true);
    // a chunked body is not followed to its end: taken as the body
    expect(
      followedByAnotherRequest(
        latin1('POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'),
      ),
    ).toBe(false);
    // a head not complete in the read says nothing
    expect(followedByAnotherRequest(latin1('GET /a HTTP/1.1\r\nHost: h\r\n'))).toBe(false);
  });
});
