import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ContextResolver, NO_CONTEXT } from '../../agent/attribution/context-resolver';
import { silentLogger } from '../../core/log/logger';
import { ContextKind } from '../../core/model';

const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';

const head = (extra: string) => `GET /x HTTP/1.1\r\nHost: h\r\n${extra}\r\n`;

describe('ContextResolver', () => {
  it('resolves markers, clears and malformed markers against the parent', () => {
    const r = new ContextResolver(silentLogger);
    expect(r.define(1, 0, ContextKind.Marker, latin1('KREPLAY-CTX txn=a trace=b'))).toMatchObject({
      transactionId: 'a',
      traceId: 'b',
    });
    expect(r.define(2, 1, ContextKind.Marker, latin1('KREPLAY-CTX bogus'))).toMatchObject({
      transactionId: 'a',
      traceId: 'b',
    });
    expect(r.malformedMarkers).toBe(1);
    expect(r.define(3, 2, ContextKind.Marker, latin1('KREPLAY-CTX\n'))).toMatchObject({
      transactionId: null,
      traceId: null,
    });
    expect(r.lookup(2)).toMatchObject({ transactionId: 'a' });
    expect(r.lookup(0)).toMatchObject({ transactionId: null });
  });

  it('gives a request head read the request context, none when split or untraced, the marker precedence', () => {
    const r = new ContextResolver(silentLogger);
    expect(
      r.define(1, 0, ContextKind.HttpRequest, latin1(head(`traceparent: ${TP}\r\nX-Request-Id: r1\r\n`))),
    ).toMatchObject({ transactionId: 'r1', traceId: TRACE });
    // the next request on the thread replaces the context, even with nothing to replace it by
    expect(r.define(2, 1, ContextKind.HttpRequest, latin1(`GET /x HTTP/1.1\r\ntraceparent: ${TP}\r\n`))).toBe(
      NO_CONTEXT,
    );
    expect(r.incompleteRequestHeads).toBe(1);
    r.define(3, 2, ContextKind.HttpRequest, latin1(head(`traceparent: ${TP}\r\n`)));
    expect(r.define(4, 3, ContextKind.HttpRequest, latin1(head('traceparent: 00-zz-01\r\n')))).toBe(
      NO_CONTEXT,
    );
    expect(r.untracedRequestHeads).toBe(1);
    // two requests in one read (pipelined): which one a later call serves is not known
    expect(r.define(7, 4, ContextKind.HttpRequest, latin1(head(`traceparent: ${TP}\r\n`) + head('')))).toBe(
      NO_CONTEXT,
    );
    expect(r.pipelinedRequestHeads).toBe(1);
    r.define(5, 4, ContextKind.Marker, latin1('KREPLAY-CTX txn=m'));
    expect(r.define(6, 5, ContextKind.HttpRequest, latin1(head(`traceparent: ${TP}\r\n`)))).toMatchObject({
      transactionId: 'm',
      explicit: true,
    });
  });

  it('lets an explicit marker take precedence over HTTP heads until cleared', () => {
    const r = new ContextResolver(silentLogger);
    r.define(1, 0, ContextKind.Marker, latin1('KREPLAY-CTX txn=m'));
    expect(
      r.define(2, 1, ContextKind.Http, latin1(`GET / HTTP/1.1\r\ntraceparent: ${TP}\r\n\r\n`)),
    ).toMatchObject({
      transactionId: 'm',
    });
    r.define(3, 2, ContextKind.Marker, latin1('KREPLAY-CTX'));
    expect(
      r.define(4, 3, ContextKind.Http, latin1(`GET / HTTP/1.1\r\ntraceparent: ${TP}\r\n\r\n`)),
    ).toMatchObject({
      transactionId: TRACE,
      traceId: TRACE,
    });
  });

  it('keeps the parent for a head without a valid traceparent, and counts unknown ids', () => {
    const r = new ContextResolver(silentLogger);
    r.define(
      1,
      0,
      ContextKind.Http,
      latin1(`GET / HTTP/1.1\r\ntraceparent: ${TP}\r\nx-request-id: r1\r\n\r\n`),
    );
    expect(r.define(2, 1, ContextKind.Http, latin1('HTTP/1.1 204 No Content\r\n\r\n'))).toMatchObject({
      transactionId: 'r1',
    });
    expect(r.lookup(99)).toMatchObject({ transactionId: null });
    expect(r.unknownIds).toBe(1);
  });

  it('holds ~200 bytes a remembered context, none of its head (it held the head and a hidden class: ~1 KiB a request)', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const r = new ContextResolver(silentLogger);
    // a browser's head: most of its bytes are headers the context does not need
    const cookie = `cookie: session=${'c'.repeat(700)}\r\n`;
    const count = 20000;
    const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 1; i <= count; i++) {
      const tp = `00-${hex(i, 32)}-${hex(i, 16)}-01`;
      r.define(
        i,
        0,
        ContextKind.HttpRequest,
        latin1(head(`${cookie}traceparent: ${tp}\r\nx-request-id: r-${i}\r\n`)),
      );
    }
    gc();
    const perContext = (process.memoryUsage().heapUsed - before) / count;
    expect(r.lookup(count)).toMatchObject({ transactionId: `r-${count}`, traceId: hex(count, 32) });
    expect(r.lookup(1)).toMatchObject({ transactionId: 'r-1', parentSpanId: hex(1, 16), traceFlags: 1 });
    expect(perContext).toBeLessThan(320);
  });
});
