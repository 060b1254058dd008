import { mapTarget, collectMaps } from '../../cli/exec/target-keys';
import { decodeIncident, IncidentWriter, type RedactKind } from '../../core/incident';
import type { ApiEvent, SysWriteEvent } from '../../core/model';
import { incidentEvents } from '../support/incident-events';

function redacted(events: readonly ApiEvent[], redact: RedactKind[]): ApiEvent[] {
  const writer = new IncidentWriter({
    transactionId: 'txn-1',
    source: 'node-stores',
    exportedAt: 'x',
    redact,
  });
  for (const e of events) writer.add(e);
  return decodeIncident(writer.finish(null), 'x').events;
}

const writes = (events: readonly ApiEvent[]) =>
  events.filter((e): e is SysWriteEvent => e.event_type === 'sys_write');

describe('redaction', () => {
  const events = incidentEvents(300);

  test('replaces paths by component, peers by host and services, with one token per value', () => {
    const out = redacted(events, ['paths', 'peers', 'services']);
    const targets = [...new Set(writes(out).map((e) => e.target))];
    expect(targets).toEqual([
      '/p1/p2/p3/p4',
      '/p1/p2/p3/p5',
      'tcp h1:5432',
      'unix /p6/p3/p7',
      '/dev/null',
      'pipe',
    ]);
    expect([...new Set(out.map((e) => e.service_name))]).toEqual(['s1', 's2']);
    // nothing else changes
    expect(out.map((e) => ({ ...e, target: null, service_name: null }))).toEqual(
      events.map((e) => ({ ...e, target: null, service_name: null })),
    );
  });

  test('keeps matching: events to one target before share one token after, and distinct ones stay distinct', () => {
    const out = writes(redacted(events, ['paths', 'peers']));
    const before = writes(events);
    const pairs = new Map<string, string>();
    before.forEach((e, i) => {
      const token = out[i]!.target!;
      expect(pairs.get(e.target!) ?? token).toBe(token);
      pairs.set(e.target!, token);
    });
    expect(new Set(pairs.values()).size).toBe(pairs.size);
  });

  test('keeps a container as its JSON, and leaves it out when services are redacted (it names them)', () => {
    const container = {
      id: 'c'.repeat(64),
      runtime: 'podman' as const,
      name: 'shop-a',
      image: 'localhost/shop:1',
      pod: 'shop-7d9',
      namespace: 'prod',
      labels: { tier: 'web' },
    };
    const inContainer = events.slice(0, 3).map((e) => ({ ...e, container }));
    expect(redacted(inContainer, []).map((e) => e.container as unknown)).toEqual(
      inContainer.map(() => JSON.stringify(container)),
    );
    expect(redacted(inContainer, ['services']).map((e) => e.container)).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });

  test('only what is asked for is redacted', () => {
    const out = redacted(events, ['services']);
    expect(writes(out).map((e) => e.target)).toEqual(writes(events).map((e) => e.target));
    expect(out[0]!.service_name).toBe('s1');
  });

  test('keeps the markers of truncated and deleted paths', () => {
    const base = writes(events)[0]!;
    const odd = [
      { ...base, target: '.../deep/dir/file.log' },
      { ...base, target: '/tmp/gone.txt (deleted)' },
      { ...base, target_kind: 'socket' as const, target: 'tcp [2001:db8::1]:443' },
      { ...base, target_kind: 'socket' as const, target: 'unix @abstract-name' },
      { ...base, target_kind: 'socket' as const, target: 'udp' },
      // a connection accepted on that host keeps its word and shares the host's token
      { ...base, target_kind: 'socket' as const, target: 'tcp accepted [2001:db8::1]:8443' },
    ];
    const out = writes(redacted(odd, ['paths', 'peers'])).map((e) => e.target);
    expect(out).toEqual([
      '.../p1/p2/p3',
      '/p4/p5 (deleted)',
      'tcp h1:443',
      'unix @h2',
      'udp',
      'tcp accepted h1:8443',
    ]);
    expect(mapTarget(out[5]!, 'socket', collectMaps('h1=127.0.0.1'))).toBe('tcp accepted 127.0.0.1:8443');
  });

  test('--map of a redacted directory covers what lies under it, and a host map keeps the port', () => {
    const out = writes(redacted(events, ['paths', 'peers']));
    const maps = ['/p1/p2/p3=/tmp/test-app', 'h1=127.0.0.1', '/p6/p3=/tmp/run'].reduce(
      (all, m) => collectMaps(m, all),
      collectMaps('/nothing=/else'),
    );
    const mapped = [...new Set(out.map((e) => mapTarget(e.target!, e.target_kind!, maps)))];
    expect(mapped).toEqual([
      '/tmp/test-app/p4',
      '/tmp/test-app/p5',
      'tcp 127.0.0.1:5432',
      'unix /tmp/run/p7',
      '/dev/null',
      'pipe',
    ]);
  });
});
