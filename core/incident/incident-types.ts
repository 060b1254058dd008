/** An incident file's content as the reader returns it and the writer takes it. */
import type { ApiEvent } from '../model/event';

/** The format version this kreplay writes; it reads every version up to it. */
export const INCIDENT_FORMAT_VERSION = 1;

/** What `--redact` may replace with tokens (redaction.ts). */
export const REDACT_KINDS = ['paths', 'peers', 'services'] as const;
export type RedactKind = (typeof REDACT_KINDS)[number];

export interface IncidentHeader {
  /** the format version the file was written in */
  format_version: number;
  transaction_id: string;
  /** the kreplay that wrote the file */
  kreplay_version: string;
  /** ISO 8601 UTC; SOURCE_DATE_EPOCH when the exporter had it set */
  exported_at: string;
  /** where the events were read: the daemon's node files or its ClickHouse fleet store */
  source: 'node-stores' | 'clickhouse';
  events: number;
  /** the first event's start and the latest end (start + duration) of any event; null when empty */
  first_ns: bigint | null;
  end_ns: bigint | null;
  /** what was replaced by tokens; empty when nothing was */
  redacted: RedactKind[];
  /**
   * The calls that made the transaction slow or fail (incident-causes.ts), marked at export;
   * null in a file exported before kreplay marked them (a reader computes them from the events)
   */
  causes: IncidentCause[] | null;
  /** "sha256:" + hex of the content (filled in by the reader, checked on every read) */
  digest: string;
}

/** A call marked as a cause of the incident: the event at `index` in replay order. */
export interface IncidentCause {
  index: number;
  /** response: the upstream's response wait; duration: the call's own time; error: it failed so */
  cause: 'response' | 'duration' | 'error';
  wait_ns: bigint;
  /** error: the errno's name */
  errno: string | null;
}

/**
 * A recording run (an agent's lifetime on one node store) that overlaps the
 * incident, and what it lost meanwhile. Node stores know their runs; a fleet
 * store does not, and an incident exported from one has `runs: null`
 * ("unknown"), never a made-up run.
 */
export interface IncidentRun {
  node: string;
  /** the store whose event ids begin with it */
  store_id: string;
  started_ns: bigint;
  /** null: still running at export */
  stopped_ns: bigint | null;
  kernel: string;
  agent_version: string;
  /** how far this node's clock may be from true time */
  clock_error_ns: bigint;
  clock_offset_ns: bigint;
  /** 1/N of writes without a context were kept (1: all) */
  sample_background: number;
  /** the run's --include/--exclude filter (null: everything), "redacted" in a redacted file */
  filter: unknown;
  start_reason: string | null;
  exit_reason: string | null;
  /**
   * Each cumulative counter's growth over the incident's window, read from
   * the counter snapshots that bracket it (so it may include a little before
   * and after: an upper bound). Names as the counters table stores them
   * (`sys_write_dropped`, `disk_full_dropped`, ...). Empty when the run
   * recorded no snapshot at or after the window's start.
   */
  counters: Record<string, number>;
  /** the snapshots the counters were read between (null: none before the window, counted from 0) */
  counters_from_ns: bigint | null;
  counters_to_ns: bigint | null;
}

/** `E`: the events as read (every field, or the fields a reader asked for: IncidentFields). */
export interface Incident<E = ApiEvent> {
  header: IncidentHeader;
  /** null: the source keeps no runs (ClickHouse), so completeness is unknown */
  runs: IncidentRun[] | null;
  /** the transaction's events in replay order ((timestamp_ns, event_id)) */
  events: E[];
}

/** A read of only some of the events' fields: the rest are checked, not decoded. */
export interface IncidentFields {
  fields: ReadonlySet<string>;
}
