import { execFileSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import {
  decodeIncident,
  exportTime,
  IncidentFileError,
  IncidentWriter,
  readIncidentFile,
  writeIncidentFile,
  type IncidentRun,
} from '../../core/incident';
import { decodeEvents, encodeEvents, type EventObject } from '../../core/incident/event-columns';
import { VERSION } from '../../core/version';
import type { ApiEvent } from '../../core/model';
import { incidentEvents } from '../support/incident-events';
import { useTempDir } from '../support/temp-dir';

const RUN: IncidentRun = {
  node: 'node-a',
  store_id: 'a1b2c3d4e5f6',
  started_ns: 1_763_899_000_000_000_000n,
  stopped_ns: null,
  kernel: '6.18.0',
  agent_version: '0.9.0',
  clock_error_ns: 250_000n,
  clock_offset_ns: -12n,
  sample_background: 10,
  filter: { include: ['service:checkout'] },
  start_reason: 'start',
  exit_reason: null,
  counters: { sys_write_dropped: 3, disk_full_dropped: 0 },
  counters_from_ns: 1_763_899_999_000_000_000n,
  counters_to_ns: null,
};

function exportOf(
  events: readonly ApiEvent[],
  opts: { at?: string; redact?: ('paths' | 'peers' | 'services')[] } = {},
): Buffer {
  const writer = new IncidentWriter({
    transactionId: 'txn-1',
    source: 'node-stores',
    exportedAt: opts.at ?? '2026-11-23T00:00:00.000Z',
    redact: opts.redact,
  });
  for (const e of events) writer.add(e);
  return writer.finish([RUN]);
}

/** The JSON text inside a file, and the file made again from (edited) text. */
const text = (bytes: Buffer) => zstdDecompressSync(bytes).toString();
const pack = (json: string) => zstdCompressSync(Buffer.from(json));

function errorOf(bytes: Buffer): IncidentFileError {
  try {
    decodeIncident(bytes, 'inc.kri');
  } catch (err) {
    if (err instanceof IncidentFileError) return err;
    throw err;
  }
  throw new Error('decoded a bad file');
}

describe('incident file', () => {
  const dir = useTempDir('kreplay-incident-');
  const events = incidentEvents(2000);

  test('gives back every event with every field, in order, with its header and runs', () => {
    const incident = decodeIncident(exportOf(events), 'inc.kri');
    expect(incident.events).toEqual(events);
    expect(incident.events.map((e) => Object.keys(e))).toEqual(events.map((e) => Object.keys(e)));
    expect(incident.runs).toEqual([RUN]);
    expect(incident.header).toEqual({
      format_version: 1,
      transaction_id: 'txn-1',
      kreplay_version: VERSION,
      exported_at: '2026-11-23T00:00:00.000Z',
      source: 'node-stores',
      events: 2000,
      first_ns: events[0]!.timestamp_ns,
      end_ns: events.reduce(
        (end, e) => (e.timestamp_ns + e.duration_ns > end ? e.timestamp_ns + e.duration_ns : end),
        0n,
      ),
      redacted: [],
      causes: expect.any(Array),
      digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
    });
  });

  test('carries event types and fields it has never heard of, nulls and unusual values included', () => {
    const extra = [
      ...events.slice(0, 3),
      { ...events[3]!, event_type: 'sys_read', syscall: 'recvfrom', response_ns: 1_500_000n },
      { ...events[4]!, event_type: 'sys_read', syscall: 'read', response_ns: null },
      {
        ...events[5]!,
        event_type: 'sys_connect',
        target: 'tcp [::1]:8080',
        duration_ns: 2n ** 62n,
        ret: -111,
      },
      { ...events[6]!, comm: 'naïve "quoted" \\ comm', fd: -1 },
    ] as unknown as ApiEvent[];
    expect(decodeIncident(exportOf(extra), 'x').events).toEqual(extra);
  });

  test('read for some fields, events hold exactly those, with the values a whole read gives', () => {
    const fields = new Set(['event_type', 'timestamp_ns', 'target', 'bytes']);
    const some = decodeIncident(exportOf(events), 'inc.kri', { fields }).events;
    expect(some).toEqual(
      events.map((e) => Object.fromEntries(Object.entries(e).filter(([key]) => fields.has(key)))),
    );
  });

  test('read for some fields, a column left undecoded must still hold a value per event', () => {
    const columns = encodeEvents(events.slice(0, 10) as unknown as EventObject[]);
    const comm = columns.columns.comm!;
    if (comm.codec !== 'dict') throw new Error(`the fixture's comm column is ${comm.codec}, not dict`);
    comm.index.pop();
    expect(() => decodeEvents(columns, new Set(['event_type']))).toThrow(
      'column comm: holds 9 values for 10 events',
    );
    columns.columns.comm = { codec: 'zip' } as unknown as typeof comm;
    expect(() => decodeEvents(columns, new Set(['event_type']))).toThrow(
      'column comm has an unknown codec "zip"',
    );
  });

  test('an empty event list and a single event read back', () => {
    expect(decodeIncident(exportOf(events.slice(0, 1)), 'x').events).toEqual(events.slice(0, 1));
  });

  test('event ids that are not store ids of their timestamps are kept as they are', () => {
    const odd = events
      .slice(0, 4)
      .map((e, i) => ({ ...e, event_id: i === 2 ? 'not-a-store-id' : e.event_id }));
    expect(decodeIncident(exportOf(odd), 'x').events).toEqual(odd);
  });

  test('is deterministic: the same events give the same bytes; only the export time changes them', () => {
    expect(exportOf(events).equals(exportOf(incidentEvents(2000)))).toBe(true);
    expect(exportOf(events, { at: '2030-01-01T00:00:00.000Z' }).equals(exportOf(events))).toBe(false);
  });

  test('SOURCE_DATE_EPOCH sets the export time', () => {
    expect(exportTime({ SOURCE_DATE_EPOCH: '1700000000' })).toBe('2023-11-14T22:13:20.000Z');
    expect(exportTime({}, Date.UTC(2026, 0, 2))).toBe('2026-01-02T00:00:00.000Z');
  });

  test('writing leaves a file untouched when only the export time differs, and replaces it otherwise', async () => {
    const path = join(dir.path, 'inc.kri');
    expect(await writeIncidentFile(path, exportOf(events))).toBe(true);
    const before = statSync(path).mtimeMs;
    expect(await writeIncidentFile(path, exportOf(events, { at: '2031-05-05T00:00:00.000Z' }))).toBe(false);
    expect(readFileSync(path).equals(exportOf(events))).toBe(true);
    expect(statSync(path).mtimeMs).toBe(before);
    expect(await writeIncidentFile(path, exportOf(events.slice(1)))).toBe(true);
    expect((await readIncidentFile(path)).events).toHaveLength(events.length - 1);
  });

  test('is at most 40 bytes per event on these events', () => {
    const bytes = exportOf(incidentEvents(20_000));
    expect(bytes.length / 20_000).toBeLessThan(40);
  });

  test('a truncated file is named as truncated', () => {
    const bytes = exportOf(events);
    const err = errorOf(bytes.subarray(0, bytes.length - 100));
    expect(err.code).toBe('E_INCIDENT_TRUNCATED');
    expect(err.message).toMatch(/^inc\.kri: truncated/);
  });

  test('content changed after export is a digest mismatch', () => {
    const json = text(exportOf(events)).replace('"checkout"', '"checkout2"');
    const err = errorOf(pack(json));
    expect(err.code).toBe('E_INCIDENT_DIGEST');
    expect(err.message).toMatch(/^inc\.kri: digest mismatch/);
  });

  test('a damaged zstd frame is named as damaged', () => {
    const bytes = Buffer.from(exportOf(events));
    bytes[bytes.length - 40]! ^= 0xff;
    expect(['E_INCIDENT_CORRUPT', 'E_INCIDENT_DIGEST']).toContain(errorOf(bytes).code);
  });

  test('a newer format version is refused, asking for an upgrade', () => {
    const json = text(exportOf(events)).replace('{"kreplay_incident":1,', '{"kreplay_incident":2,');
    const err = errorOf(pack(json));
    expect(err.code).toBe('E_INCIDENT_NEWER');
    expect(err.message).toMatch(/format version 2 is newer .* upgrade kreplay/);
  });

  test('files that are not incidents are named as such', () => {
    expect(errorOf(Buffer.from('SQLite format 3\0...')).code).toBe('E_INCIDENT_NOT_INCIDENT');
    expect(errorOf(Buffer.alloc(0)).code).toBe('E_INCIDENT_NOT_INCIDENT');
    expect(errorOf(pack('{"traceEvents":[]}')).code).toBe('E_INCIDENT_NOT_INCIDENT');
  });

  test('a missing file is an IncidentFileError naming it', async () => {
    await expect(readIncidentFile('/nonexistent/inc.kri')).rejects.toMatchObject({
      code: 'E_INCIDENT_READ',
      message: expect.stringMatching(/^\/nonexistent\/inc\.kri: cannot be read/),
    });
  });

  test('zstd and jq read it without kreplay, as the README shows', () => {
    const path = join(dir.path, 'inc.kri');
    writeFileSync(path, exportOf(events));
    const header = JSON.parse(
      execFileSync('sh', ['-c', `zstd -dc ${path} | jq -c .header`], { encoding: 'utf8' }),
    ) as { transaction_id: string; events: number };
    expect(header).toMatchObject({ transaction_id: 'txn-1', events: 2000 });
    const targets = execFileSync('sh', ['-c', `zstd -dc ${path} | jq -r '.events.columns.target.dict[]'`], {
      encoding: 'utf8',
    });
    expect(targets.trim().split('\n')).toEqual([
      ...new Set(events.flatMap((e) => ('target' in e ? [e.target] : []))),
    ]);
  });
});
