/**
 * The incident file's bytes: one zstd frame (with zstd's own checksum) of
 * one JSON document, readable by standard tools (`zstd -dc FILE | jq`):
 *
 *   {"kreplay_incident":VERSION,"digest":"sha256:HEX","header":{...},"runs":[...]|null,"events":{...}}
 *
 * The digest is the SHA-256 of the document's text after the digest member
 * (from `"header"` to the closing brace), so a reader checks it without
 * re-serializing anything. 64-bit integers outside `events` are decimal
 * strings; `events` is columnar (event-columns.ts). The writer emits members
 * in a fixed order and the columns in event order, so the same content gives
 * the same bytes.
 */
import { createHash } from 'node:crypto';
import { constants, zstdCompressSync, zstdDecompressSync } from 'node:zlib';
import { decodeEvents, type EventColumns, type EventObject } from './event-columns';
import { IncidentFileError } from './incident-error';
import {
  INCIDENT_FORMAT_VERSION,
  REDACT_KINDS,
  type Incident,
  type IncidentCause,
  type IncidentFields,
  type IncidentHeader,
  type IncidentRun,
} from './incident-types';

/** The first bytes of every incident file: a zstd frame's magic number. */
export const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);
/**
 * Level 9: 100,000 events of bench/incident.ts compress in ~0.3 s to 13.3 B/event; level 12 took
 * 3x as long for 13.0, level 19 40x as long for 12.1.
 */
const ZSTD_LEVEL = 9;
/** A decompressed file larger than this is refused rather than exhausting memory (~25x a 1M-event file). */
export const MAX_INCIDENT_JSON_BYTES = 1 << 30;

const PREFIX = /^\{"kreplay_incident":(\d+),"digest":"sha256:([0-9a-f]{64})",/;

export type HeaderFields = Omit<IncidentHeader, 'format_version' | 'digest'>;

const bigintText = (_key: string, value: unknown) => (typeof value === 'bigint' ? value.toString() : value);

function headerJson(h: HeaderFields): string {
  // member by member: the order is part of the bytes
  const fields = {
    transaction_id: h.transaction_id,
    kreplay_version: h.kreplay_version,
    exported_at: h.exported_at,
    source: h.source,
    events: h.events,
    first_ns: h.first_ns,
    end_ns: h.end_ns,
    redacted: h.redacted,
    causes: h.causes,
  };
  return JSON.stringify(fields, bigintText);
}

function runJson(r: IncidentRun): string {
  const fields = {
    node: r.node,
    store_id: r.store_id,
    started_ns: r.started_ns,
    stopped_ns: r.stopped_ns,
    kernel: r.kernel,
    agent_version: r.agent_version,
    clock_error_ns: r.clock_error_ns,
    clock_offset_ns: r.clock_offset_ns,
    sample_background: r.sample_background,
    filter: r.filter,
    start_reason: r.start_reason,
    exit_reason: r.exit_reason,
    counters: r.counters,
    counters_from_ns: r.counters_from_ns,
    counters_to_ns: r.counters_to_ns,
  };
  return JSON.stringify(fields, bigintText);
}

export const sha256 = (text: string | Buffer) => createHash('sha256').update(text).digest('hex');

/** The file's bytes. */
export function encodeIncident(
  header: HeaderFields,
  runs: IncidentRun[] | null,
  events: EventColumns,
): Buffer {
  const body =
    `"header":${headerJson(header)},"runs":${runs === null ? 'null' : `[${runs.map(runJson).join(',')}]`}` +
    `,"events":${JSON.stringify(events)}}`;
  const text = `{"kreplay_incident":${INCIDENT_FORMAT_VERSION},"digest":"sha256:${sha256(body)}",${body}`;
  return zstdCompressSync(Buffer.from(text), {
    params: {
      [constants.ZSTD_c_compressionLevel]: ZSTD_LEVEL,
      [constants.ZSTD_c_checksumFlag]: 1,
      [constants.ZSTD_c_contentSizeFlag]: 1,
    },
  });
}

/**
 * How far an incident file may inflate: its JSON compresses well (10-50x on real incidents), never
 * thousands of times, so output beyond this ratio to the file's size (with a floor for small files)
 * is a decompression bomb, refused before the memory is spent.
 */
export const MAX_INFLATE_RATIO = 200;
const INFLATE_FLOOR_BYTES = 64 << 20;

/** What inflating `compressedBytes` bytes may give at most. */
export function inflateBudget(compressedBytes: number): number {
  return Math.min(
    MAX_INCIDENT_JSON_BYTES,
    Math.max(INFLATE_FLOOR_BYTES, MAX_INFLATE_RATIO * compressedBytes),
  );
}

/** The content size a zstd frame's header declares (RFC 8878, 3.1.1.1), or null where it declares none. */
export function declaredContentSize(bytes: Buffer): number | null {
  if (bytes.length < 5) return null;
  const descriptor = bytes[4]!;
  const fcsFlag = descriptor >> 6;
  const singleSegment = (descriptor >> 5) & 1;
  const dictionaryBytes = [0, 1, 2, 4][descriptor & 3]!;
  const fcsBytes = [singleSegment ? 1 : 0, 2, 4, 8][fcsFlag]!;
  if (fcsBytes === 0) return null;
  const at = 5 + (singleSegment ? 0 : 1) + dictionaryBytes;
  if (bytes.length < at + fcsBytes) return null;
  if (fcsBytes === 1) return bytes[at]!;
  if (fcsBytes === 2) return bytes.readUInt16LE(at) + 256;
  if (fcsBytes === 4) return bytes.readUInt32LE(at);
  return Number(bytes.readBigUInt64LE(at));
}

/** The decompressed JSON text of an incident file's bytes. */
function inflate(bytes: Buffer, file: string): string {
  if (bytes.length < ZSTD_MAGIC.length || !bytes.subarray(0, 4).equals(ZSTD_MAGIC))
    throw new IncidentFileError('E_INCIDENT_NOT_INCIDENT', file, 'not an incident file (not a zstd frame)');
  const budget = inflateBudget(bytes.length);
  const declared = declaredContentSize(bytes);
  const tooLarge = (size: string) =>
    new IncidentFileError(
      'E_INCIDENT_READ',
      file,
      `would inflate ${bytes.length} bytes to ${size} bytes of JSON, over the ${budget} a file this size may ` +
        `hold (${MAX_INFLATE_RATIO}:1, at most ${MAX_INCIDENT_JSON_BYTES}): refused as a decompression bomb`,
    );
  // refused on the header's word, before any memory is spent
  if (declared !== null && declared > budget) throw tooLarge(String(declared));
  let text: Buffer;
  try {
    text = zstdDecompressSync(bytes, { maxOutputLength: budget });
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'Z_BUF_ERROR')
      throw new IncidentFileError(
        'E_INCIDENT_TRUNCATED',
        file,
        'truncated: the file ends inside its zstd frame',
        {
          cause: err,
        },
      );
    if (code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(`more than ${budget}`);
    throw new IncidentFileError('E_INCIDENT_CORRUPT', file, `damaged: zstd says ${(err as Error).message}`, {
      cause: err,
    });
  }
  return text.toString('utf8');
}

interface Envelope {
  version: number;
  digest: string;
  /** the text the digest covers */
  body: string;
}

function envelope(text: string, file: string): Envelope {
  const m = PREFIX.exec(text.slice(0, 200));
  if (!m)
    throw new IncidentFileError(
      'E_INCIDENT_NOT_INCIDENT',
      file,
      'not an incident file (a zstd frame of something else)',
    );
  const version = Number(m[1]);
  if (version > INCIDENT_FORMAT_VERSION)
    throw new IncidentFileError(
      'E_INCIDENT_NEWER',
      file,
      `format version ${version} is newer than this kreplay reads (up to ${INCIDENT_FORMAT_VERSION}); upgrade kreplay`,
    );
  if (version < 1)
    throw new IncidentFileError('E_INCIDENT_CORRUPT', file, `format version ${version} does not exist`);
  const body = text.slice(m[0].length);
  if (sha256(body) !== m[2])
    throw new IncidentFileError(
      'E_INCIDENT_DIGEST',
      file,
      `digest mismatch: the content hashes to sha256:${sha256(body)}, the file says sha256:${m[2]}; it was changed after export`,
    );
  return { version, digest: `sha256:${m[2]}`, body };
}

const nsOf = (value: unknown): bigint | null =>
  value === null || value === undefined ? null : BigInt(value as string);

function toRun(r: Record<string, unknown>): IncidentRun {
  return {
    node: String(r.node),
    store_id: String(r.store_id),
    started_ns: BigInt(r.started_ns as string),
    stopped_ns: nsOf(r.stopped_ns),
    kernel: String(r.kernel),
    agent_version: String(r.agent_version),
    clock_error_ns: BigInt(r.clock_error_ns as string),
    clock_offset_ns: BigInt(r.clock_offset_ns as string),
    sample_background: Number(r.sample_background),
    filter: r.filter ?? null,
    start_reason: (r.start_reason as string | null) ?? null,
    exit_reason: (r.exit_reason as string | null) ?? null,
    counters: (r.counters as Record<string, number>) ?? {},
    counters_from_ns: nsOf(r.counters_from_ns),
    counters_to_ns: nsOf(r.counters_to_ns),
  };
}

function toCause(c: Record<string, unknown>): IncidentCause {
  const cause = String(c.cause);
  if (!['response', 'duration', 'error'].includes(cause)) throw new Error(`a cause of kind ${cause}`);
  return {
    index: Number(c.index),
    cause: cause as IncidentCause['cause'],
    wait_ns: BigInt(c.wait_ns as string),
    errno: (c.errno as string | null) ?? null,
  };
}

/** Version 1's document (the one version so far): header, runs and columnar events. */
function parseV1(
  doc: Record<string, unknown>,
  digest: string,
  fields: ReadonlySet<string> | undefined,
): Incident<EventObject> {
  const h = doc.header as Record<string, unknown>;
  if (typeof h !== 'object' || h === null || typeof h.transaction_id !== 'string')
    throw new Error('no header');
  const redacted = (h.redacted as string[]).filter((k): k is IncidentHeader['redacted'][number] =>
    (REDACT_KINDS as readonly string[]).includes(k),
  );
  const header: IncidentHeader = {
    format_version: 1,
    transaction_id: h.transaction_id,
    kreplay_version: String(h.kreplay_version),
    exported_at: String(h.exported_at),
    source: h.source as IncidentHeader['source'],
    events: Number(h.events),
    first_ns: nsOf(h.first_ns),
    end_ns: nsOf(h.end_ns),
    redacted,
    causes: Array.isArray(h.causes) ? (h.causes as Record<string, unknown>[]).map(toCause) : null,
    digest,
  };
  const runs = doc.runs === null ? null : (doc.runs as Record<string, unknown>[]).map(toRun);
  const events = decodeEvents(doc.events as EventColumns, fields);
  if (events.length !== header.events)
    throw new Error(`the header says ${header.events} events, the columns hold ${events.length}`);
  return { header, runs, events };
}

/**
 * The incident in `bytes` (read from `file`, named in errors), checked whole
 * before anything is returned; with `only`, its events hold only those fields.
 */
export function decodeIncident(bytes: Buffer, file: string): Incident;
export function decodeIncident(bytes: Buffer, file: string, only: IncidentFields): Incident<EventObject>;
export function decodeIncident(
  bytes: Buffer,
  file: string,
  only?: IncidentFields,
): Incident | Incident<EventObject> {
  const { version, digest, body } = envelope(inflate(bytes, file), file);
  try {
    const doc = JSON.parse(`{${body}`) as Record<string, unknown>;
    // a later version adds its parser here; every older one stays
    if (version === 1) {
      const incident = parseV1(doc, digest, only?.fields);
      // every field decoded: the exporter wrote ApiEvents
      return only ? incident : (incident as unknown as Incident);
    }
    throw new Error(`no parser for version ${version}`);
  } catch (err) {
    throw new IncidentFileError('E_INCIDENT_CORRUPT', file, `malformed incident: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

const EXPORTED_AT =
  /^("header":\{"transaction_id":"(?:[^"\\]|\\.)*","kreplay_version":"(?:[^"\\]|\\.)*","exported_at":)"[^"]*"/;

/**
 * What a file holds apart from its export time: the same key for two exports
 * of the same content at different times (null: not a readable incident file).
 */
export function contentKey(bytes: Buffer): string | null {
  try {
    const { body } = envelope(inflate(bytes, ''), '');
    return sha256(body.replace(EXPORTED_AT, '$1""'));
  } catch {
    return null;
  }
}
