import { ContextResolver, NO_CONTEXT } from '../../agent/attribution/context-resolver';
import { silentLogger } from '../../core/log/logger';
import { ContextKind } from '../../core/model';

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

describe('ContextResolver', () => {
  it('resolves markers, clears and malformed markers against the parent', () => {
    const r = new ContextResolver(silentLogger);
    expect(r.define(1, 0, ContextKind.Marker, 'KREPLAY-CTX txn=a trace=b')).toMatchObject({
      transactionId: 'a',
      traceId: 'b',
    });
    expect(r.define(2, 1, ContextKind.Marker, 'KREPLAY-CTX bogus')).toMatchObject({
      transactionId: 'a',
      traceId: 'b',
    });
    expect(r.malformedMarkers).toBe(1);
    expect(r.define(3, 2, ContextKind.Marker, 'KREPLAY-CTX\n')).toMatchObject({
      transactionId: null,
      traceId: null,
    });
    expect(r.lookup(2)).toMatchObject({ transactionId: 'a' });
    expect(r.lookup(0)).toMatchObject({ transactionId: null });
  });

  it('gives a request head read the request context, none when split or untraced, the marker precedence', () => {
    const r = new ContextResolver(silentLogger);
    const head = (extra: string) => `GET /x HTTP/1.1\r\nHost: h\r\n${extra}\r\n`;
    expect(
      r.define(1, 0, ContextKind.HttpRequest, head(`traceparent: ${TP}\r\nX-Request-Id: r1\r\n`)),
    ).toMatchObject({ transactionId: 'r1', traceId: TRACE });
    // the next request on the thread replaces the context, even with nothing to replace it by
    expect(r.define(2, 1, ContextKind.HttpRequest, `GET /x HTTP/1.1\r\ntraceparent: ${TP}\r\n`)).toBe(
      NO_CONTEXT,
    );
    expect(r.incompleteRequestHeads).toBe(1);
    r.define(3, 2, ContextKind.HttpRequest, head(`traceparent: ${TP}\r\n`));
    expect(r.define(4, 3, ContextKind.HttpRequest, head('traceparent: 00-zz-01\r\n'))).toBe(NO_CONTEXT);
    expect(r.untracedRequestHeads).toBe(1);
    // two requests in one read (pipelined): which one a later call serves is not known
    expect(r.define(7, 4, ContextKind.HttpRequest, head(`traceparent: ${TP}\r\n`) + head(''))).toBe(
      NO_CONTEXT,
    );
    expect(r.pipelinedRequestHeads).toBe(1);
    r.define(5, 4, ContextKind.Marker, 'KREPLAY-CTX txn=m');
    expect(r.define(6, 5, ContextKind.HttpRequest, head(`traceparent: ${TP}\r\n`))).toMatchObject({
      transactionId: 'm',
      explicit: true,
    });
  });

  it('lets an explicit marker take precedence over HTTP heads until cleared', () => {
    const r = new ContextResolver(silentLogger);
    r.define(1, 0, ContextKind.Marker, 'KREPLAY-CTX txn=m');
    expect(r.define(2, 1, ContextKind.Http, `GET / HTTP/1.1\r\ntraceparent: ${TP}\r\n\r\n`)).toMatchObject({
      transactionId: 'm',
    });
    r.define(3, 2, ContextKind.Marker, 'KREPLAY-CTX');
    expect(r.define(4, 3, ContextKind.Http, `GET / HTTP/1.1\r\ntraceparent: ${TP}\r\n\r\n`)).toMatchObject({
      transactionId: TRACE,
      traceId: TRACE,
    });
  });

  it('keeps the parent for a head without a valid traceparent, and counts unknown ids', () => {
    const r = new ContextResolver(silentLogger);
    r.define(1, 0, ContextKind.Http, `GET / HTTP/1.1\r\ntraceparent: ${TP}\r\nx-request-id: r1\r\n\r\n`);
    expect(r.define(2, 1, ContextKind.Http, 'HTTP/1.1 204 No Content\r\n\r\n')).toMatchObject({
      transactionId: 'r1',
    });
    expect(r.lookup(99)).toMatchObject({ transactionId: null });
    expect(r.unknownIds).toBe(1);
  });
});
