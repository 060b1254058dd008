import { followedByAnotherRequest, parseHttpHead, parseMarker } from '../../agent/attribution/context-parser';

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
    expect(parseHttpHead(head)).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      transactionId: 'req-9',
      parentSpanId: '00f067aa0ba902b7',
      traceFlags: 1,
    });
  });

  it('uses the trace id as transaction id without x-request-id, also for responses', () => {
    expect(parseHttpHead(`HTTP/1.1 200 OK\r\ntraceparent: ${tp}\r\n\r\n`)).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      transactionId: '4bf92f3577b34da6a3ce929d0e0e4736',
      parentSpanId: '00f067aa0ba902b7',
      traceFlags: 1,
    });
  });

  it('keeps the flags of an unsampled traceparent', () => {
    const head = `GET / HTTP/1.1\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00\r\n\r\n`;
    expect(parseHttpHead(head)).toMatchObject({ parentSpanId: '00f067aa0ba902b7', traceFlags: 0 });
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
    expect(parseHttpHead(`GET / HTTP/1.1\r\ntraceparent: ${value}\r\n\r\n`)).toBeNull();
  });

  it('takes an x-request-id without a (valid) traceparent as the transaction, without a trace', () => {
    expect(parseHttpHead('GET / HTTP/1.1\r\nX-Request-Id: lb-77\r\n\r\n')).toEqual({
      traceId: null,
      transactionId: 'lb-77',
    });
    expect(parseHttpHead('GET / HTTP/1.1\r\ntraceparent: garbage\r\nx-request-id: lb-78\r\n\r\n')).toEqual({
      traceId: null,
      transactionId: 'lb-78',
    });
    // neither: no context; an x-request-id that is no valid value neither
    expect(parseHttpHead('GET / HTTP/1.1\r\nHost: a\r\n\r\n')).toBeNull();
    expect(parseHttpHead('GET / HTTP/1.1\r\nx-request-id: a b\r\n\r\n')).toBeNull();
  });

  it('ignores a traceparent after the head and a head that is not HTTP/1.x', () => {
    expect(parseHttpHead(`GET / HTTP/1.1\r\nHost: a\r\n\r\ntraceparent: ${tp}\r\n`)).toBeNull();
    expect(parseHttpHead(`GET / HTTP/2\r\ntraceparent: ${tp}\r\n\r\n`)).toBeNull();
  });
});

describe('followedByAnotherRequest', () => {
  it('tells a pipelined request after a head and its content-length body from the body alone', () => {
    const get = 'GET /a HTTP/1.1\r\nHost: h\r\n\r\n';
    expect(followedByAnotherRequest(get)).toBe(false);
    expect(followedByAnotherRequest(get + get)).toBe(true);
    expect(followedByAnotherRequest(get + 'G')).toBe(true);
    const post = 'POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello';
    expect(followedByAnotherRequest(post)).toBe(false);
    expect(followedByAnotherRequest(post + get)).toBe(true);
    // a chunked body is not followed to its end: taken as the body
    expect(
      followedByAnotherRequest(
        'POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
      ),
    ).toBe(false);
    // a head not complete in the read says nothing
    expect(followedByAnotherRequest('GET /a HTTP/1.1\r\nHost: h\r\n')).toBe(false);
  });
});
