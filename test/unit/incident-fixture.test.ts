/**
 * A version-1 incident file, committed: every later kreplay must read it as
 * it was written. Never regenerate it; a new format version adds its own fixture.
 */
import { join } from 'node:path';
import { readIncidentFile } from '../../core/incident';
import { repoRoot } from '../../core/repo-root';

const FIXTURE = join(repoRoot(), 'test', 'fixtures', 'incident-v1.kri');

test('the version-1 fixture reads back whole', async () => {
  const incident = await readIncidentFile(FIXTURE);
  expect(incident.header).toEqual({
    format_version: 1,
    transaction_id: 'fixture-txn',
    kreplay_version: '0.1.0',
    exported_at: '2026-11-23T00:00:00.000Z',
    source: 'node-stores',
    events: 40,
    first_ns: 1763900000123457789n,
    end_ns: 1763900000127085315n,
    redacted: ['peers'],
    // exported before kreplay marked causes: unknown, never made up
    causes: null,
    digest: 'sha256:8dca273bd849ef9462b9fdb8fe040e8af13becdb75c534674b8e5223c3edbf77',
  });
  expect(incident.runs).toEqual([
    {
      node: 'node-a',
      store_id: 'a1b2c3d4e5f6',
      started_ns: 1763899000000000000n,
      stopped_ns: 1763900100000000000n,
      kernel: '6.18.0-kreplay',
      agent_version: '0.9.0',
      clock_error_ns: 250000n,
      clock_offset_ns: -12n,
      sample_background: 1,
      filter: null,
      start_reason: 'start',
      exit_reason: 'signal',
      counters: { sys_write_dropped: 2, disk_full_dropped: 0 },
      counters_from_ns: 1763899990000000000n,
      counters_to_ns: 1763900010000000000n,
    },
  ]);
  const { events } = incident;
  expect(events).toHaveLength(40);
  expect(events[0]).toEqual({
    event_id: 'a1b2c3d4e5f6187aa1b45eab90fd000000000001',
    timestamp_ns: 1763900000123457789n,
    duration_ns: 2000n,
    service_name: 'checkout',
    transaction_id: 'fixture-txn',
    trace_id: null,
    node: 'node-a',
    pid: 4242,
    tid: 4242,
    comm: 'checkout-api',
    bytes: 512,
    event_type: 'sys_write',
    syscall: 'pwrite64',
    fd: 3,
    ret: -28,
    target_kind: 'file',
    target: '/var/lib/app/data.sqlite',
  });
  expect(events[10]).toEqual({
    event_id: 'a1b2c3d4e5f6187aa1b45eaf5026000000000012',
    timestamp_ns: 1763900000123703334n,
    duration_ns: 1049290n,
    service_name: 'checkout',
    transaction_id: 'fixture-txn',
    trace_id: null,
    node: 'node-a',
    pid: 4242,
    tid: 4244,
    comm: 'checkout-api',
    bytes: 1536,
    event_type: 'block_io',
    device: '7:0',
    sector: 2128,
    op: 'write',
    error: 0,
  });
  expect(events[3]).toMatchObject({ target_kind: 'socket', target: 'unix /p1/p2/p3' });
  expect(events.reduce((sum, e) => sum + e.bytes, 0)).toBe(92160);
  expect(events.filter((e) => e.event_type === 'block_io')).toHaveLength(3);
  expect(events.filter((e) => e.node === 'node-b')).toHaveLength(8);
  const ts = events.map((e) => e.timestamp_ns);
  expect([...ts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(ts);
});
