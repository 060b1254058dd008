import { eventSpan, KernelSpan, SpanResources } from '../../core/otlp/event-span';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { encodeSpansJson, SpanEncoder } from '../../core/otlp/otlp-encoding';
import { spanIdOf } from '../../core/otlp/span-ids';
import { formatEventId, type ApiEvent } from '../../core/model';
import { VERSION } from '../../core/version';
import { decodeTraceJson, decodeTraceRequest } from '../support/otlp-decode';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const STORE = 'a1b2c3d4e5f6';
/** past 2^53 ns: the times must stay exact through [s, ns] and fixed64 */
const T0 = 1_795_338_478_123_456_789n;

function common(seq: number, ts: bigint, dur: bigint) {
  return {
    event_id: formatEventId(STORE, ts, seq),
    timestamp_ns: ts,
    duration_ns: dur,
    service_name: 'app',
    transaction_id: 'req-1',
    trace_id: TRACE,
    node: 'node-1',
    pid: 4242,
    tid: 4243,
    comm: 'python3',
    bytes: 0,
    parent_span_id: PARENT,
  };
}

const fsync: ApiEvent = {
  ...common(7, T0, 800_000_001n),
  event_type: 'sys_fsync',
  syscall: 'fsync',
  fd: 5,
  ret: 0,
  target_kind: 'file',
  target: '/var/lib/app/db.sqlite',
};
const upstreamRead: ApiEvent = {
  ...common(8, T0 + 900_000_000n, 1_500_000_003n),
  event_type: 'sys_read',
  bytes: 512,
  syscall: 'recvfrom',
  fd: 6,
  ret: 512,
  target_kind: 'socket',
  target: 'tcp 10.0.0.5:5432',
  response_ns: 1_499_000_000n,
};
const refused: ApiEvent = {
  ...common(9, T0 + 2_500_000_000n, 41_000n),
  event_type: 'sys_connect',
  syscall: 'connect',
  fd: 7,
  ret: -111,
  target_kind: 'socket',
  target: 'tcp [::1]:6379',
};
const accepted: ApiEvent = {
  ...common(10, T0 + 2_600_000_000n, 1_000n),
  event_type: 'sys_write',
  bytes: 17,
  syscall: 'sendto',
  fd: 4,
  ret: 17,
  target_kind: 'socket',
  target: 'tcp accepted 127.0.0.1:8080',
};
const block: ApiEvent = {
  ...common(11, T0 + 3_000_000_000n, 250_000n),
  event_type: 'block_io',
  bytes: 4096,
  device: '259:0',
  sector: 123456,
  op: 'write',
  error: -5,
};

const encodeSpans = (spans: KernelSpan[], protocol: 'http/protobuf' | 'http/json') =>
  new SpanEncoder(protocol).encode(spans);

function spansOf(events: ApiEvent[]): KernelSpan[] {
  const resources = new SpanResources();
  return events.map((e) => eventSpan(e, resources, 1)!);
}

describe('eventSpan', () => {
  it('puts each call under the traceparent span, exact to the nanosecond, with the conventions’ attributes', () => {
    const [s] = decodeTraceRequest(encodeSpans(spansOf([fsync]), 'http/protobuf'));
    expect(s).toEqual({
      traceId: TRACE,
      spanId: spanIdOf(fsync.event_id),
      parentSpanId: PARENT,
      name: 'sys_fsync /var/lib/app/db.sqlite',
      kind: 1, // SPAN_KIND_INTERNAL
      startNs: T0,
      endNs: T0 + 800_000_001n,
      // sampled, with the parent known to be remote (OTLP's span flags)
      flags: 0x301,
      attributes: {
        'process.pid': 4242,
        'thread.id': 4243,
        'thread.name': 'python3',
        'file.path': '/var/lib/app/db.sqlite',
        'kreplay.event_id': fsync.event_id,
        'kreplay.event_type': 'sys_fsync',
        'kreplay.bytes': 0,
        'kreplay.transaction_id': 'req-1',
        'kreplay.syscall': 'fsync',
        'kreplay.fd': 5,
        'kreplay.ret': 0,
        'kreplay.target_kind': 'file',
        'kreplay.target': '/var/lib/app/db.sqlite',
      },
      status: { code: 0, message: '' },
      resource: { 'service.name': 'app', 'host.name': 'node-1' },
      scope: { name: 'kreplay', version: VERSION },
    });
  });

  it('names peers, accepted connections and failures by the conventions', () => {
    const [read, connect, write, io] = decodeTraceRequest(
      encodeSpans(spansOf([upstreamRead, refused, accepted, block]), 'http/protobuf'),
    );
    expect(read!.name).toBe('sys_read tcp 10.0.0.5:5432');
    expect(read!.attributes).toMatchObject({
      'network.transport': 'tcp',
      'network.type': 'ipv4',
      'network.peer.address': '10.0.0.5',
      'network.peer.port': 5432,
      'kreplay.response_ns': 1_499_000_000,
      'kreplay.bytes': 512,
    });
    expect(read!.endNs - read!.startNs).toBe(1_500_000_003n);
    expect(connect!.attributes).toMatchObject({
      'network.type': 'ipv6',
      'network.peer.address': '::1',
      'network.peer.port': 6379,
      'error.type': 'ECONNREFUSED',
      'kreplay.ret': -111,
    });
    expect(connect!.status).toEqual({ code: 2, message: 'ECONNREFUSED' });
    // the listening address is this side's: never reported as the peer
    expect(write!.attributes).toMatchObject({
      'network.local.address': '127.0.0.1',
      'network.local.port': 8080,
    });
    expect(write!.attributes['network.peer.address']).toBeUndefined();
    expect(io).toMatchObject({
      name: 'block_io write 259:0',
      attributes: { 'kreplay.device': '259:0', 'kreplay.sector': 123456, 'error.type': 'EIO' },
      status: { code: 2, message: 'EIO' },
    });
  });

  it('makes no span without a W3C trace id, and says when the parent is unknown', () => {
    const resources = new SpanResources();
    expect(eventSpan({ ...fsync, trace_id: null }, resources)).toBeNull();
    expect(eventSpan({ ...fsync, trace_id: 'checkout-42' }, resources)).toBeNull();
    expect(eventSpan({ ...fsync, trace_id: '0'.repeat(32) }, resources)).toBeNull();
    const { parent_span_id: _, ...noParent } = fsync;
    const [s] = decodeTraceRequest(
      encodeSpans([eventSpan(noParent as ApiEvent, resources)!], 'http/protobuf'),
    );
    expect(s!.parentSpanId).toBe('');
    expect(s!.attributes['kreplay.parent_span_unknown']).toBe(true);
  });

  it('writes the request the OpenTelemetry protobuf serializer writes, as the generated code reads both', () => {
    const resources = new SpanResources();
    const other = { ...fsync, service_name: 'db', node: 'node-2', event_id: formatEventId(STORE, T0, 99) };
    const { parent_span_id: _, ...orphan } = { ...upstreamRead, event_id: formatEventId(STORE, T0, 98) };
    const spans = [fsync, upstreamRead, refused, accepted, block, other, orphan as ApiEvent].map((e) =>
      eventSpan(e, resources, 3)!,
    );
    const ours = decodeTraceRequest(encodeSpans(spans, 'http/protobuf'));
    expect(ours).toHaveLength(7);
    expect(ours).toEqual(decodeTraceRequest(ProtobufTraceSerializer.serializeRequest(spans)!));
    // attribute values of every kind, a non-ASCII name, negative and large integers
    const odd = new KernelSpan({
      ...{ traceId: TRACE, spanId: '0102030405060708', parentSpanId: null, traceFlags: 0 },
      ...{ name: 'sys_write /tmp/é 日本', startNs: T0, endNs: T0 + 1n, error: null },
      attributes: { neg: -111, big: 2 ** 52, half: 0.5, yes: true, no: false, text: 'ü' },
      resource: resources.of('s', 'n'),
    });
    // spans whose length takes one byte (no attributes) and three (a long path), and the long text
    const sized = (name: string, attributes: Record<string, string>) =>
      new KernelSpan({
        ...{ traceId: TRACE, spanId: '0102030405060709', parentSpanId: PARENT, traceFlags: 1 },
        ...{ name, startNs: T0, endNs: T0, attributes, error: 'EIO', resource: odd.resource },
      });
    const mixed = [
      odd,
      sized('x', {}),
      sized('long', { 'file.path': `/${'é'.repeat(9000)}` }),
      sized('y', {}),
    ];
    expect(decodeTraceRequest(encodeSpans(mixed, 'http/protobuf'))).toEqual(
      decodeTraceRequest(ProtobufTraceSerializer.serializeRequest(mixed)!),
    );
  });

  it("gives a container's spans its container and pod as resource attributes, one resource per container", () => {
    const container = {
      id: 'c'.repeat(64),
      runtime: 'podman' as const,
      name: 'shop-a',
      image: 'localhost/shop:1',
      pod: 'shop-7d9',
      namespace: 'prod',
      labels: { tier: 'web' },
    };
    const spans = spansOf([{ ...fsync, container }, fsync, { ...upstreamRead, container }]);
    const decoded = decodeTraceRequest(encodeSpans(spans, 'http/protobuf'));
    const inContainer = decoded.filter((s) => s.resource['container.id'] === container.id);
    expect(inContainer.map((s) => s.resource)).toEqual([
      {
        'service.name': 'app',
        'host.name': 'node-1',
        'container.id': container.id,
        'container.name': 'shop-a',
        'container.image.name': 'localhost/shop:1',
        'container.runtime': 'podman',
        'k8s.pod.name': 'shop-7d9',
        'k8s.namespace.name': 'prod',
      },
      inContainer[0]!.resource,
    ]);
    expect(decoded.filter((s) => !inContainer.includes(s)).map((s) => s.resource)).toEqual([
      { 'service.name': 'app', 'host.name': 'node-1' },
    ]);
    expect(spans[0]!.resource).toBe(spans[2]!.resource);
  });

  it('writes the same spans as OTLP/JSON, which the generated code reads back', () => {
    const spans = spansOf([fsync, upstreamRead, refused, block]);
    const json = Buffer.from(encodeSpansJson(spans)).toString('utf8');
    expect(JSON.parse(json).resourceSpans[0].scopeSpans[0].spans[0]).toMatchObject({
      traceId: TRACE,
      parentSpanId: PARENT,
      startTimeUnixNano: T0.toString(),
    });
    expect(decodeTraceJson(json)).toEqual(decodeTraceRequest(encodeSpans(spans, 'http/protobuf')));
  });
});

describe('spanIdOf', () => {
  it('is the same for an event id every time, and differs by seq and by store', () => {
    const ids = new Set<string>();
    for (let seq = 1; seq <= 5000; seq++) ids.add(spanIdOf(formatEventId(STORE, T0, seq))!);
    for (const store of ['000000000001', 'ffffffffffff']) ids.add(spanIdOf(formatEventId(store, T0, 1))!);
    expect(ids.size).toBe(5002);
    expect(spanIdOf(formatEventId(STORE, T0, 5))).toBe(spanIdOf(formatEventId(STORE, T0 + 1n, 5)));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(spanIdOf('not an event id')).toBeNull();
  });
});
