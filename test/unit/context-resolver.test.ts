import { ContextResolver } from '../../agent/attribution/context-resolver';
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
