/**
 * Where `kreplay replay` takes an incident's events from: a daemon over HTTP
 * (`kreplay replay TXN`), or incident files (`--incident FILE`, a glob for
 * many), read whole before anything runs so that a bad file replays nothing.
 */
import fs from 'node:fs';
import path from 'node:path';
import { requestJson } from '../daemon-request';
import { LOST_COUNTER_COLUMNS } from '../../agent/status';
// the file and the cause rule alone: the writer (export, redaction) is not a replay's
import { incidentCauses } from '../../core/incident/incident-causes';
import { readIncidentFile } from '../../core/incident/incident-file';
import type { IncidentCause, IncidentRun } from '../../core/incident/incident-types';
import { RECORDED_CALL_FIELDS, type RecordedCall } from './exec-plan';
import { MARKER_FIELDS } from './target-selection';

/** An event as the replay reads it: the matching's fields, and every other field the source gave. */
export type IncidentEvent = RecordedCall & Record<string, unknown>;

/** What the recording knew about its own completeness over the incident's window. */
export interface Completeness {
  /** false: the source keeps no runs (a daemon over HTTP, a fleet store), so losses are unknown */
  known: boolean;
  /** one line per counter that lost events (`node web-1: sys_write_dropped=12`) */
  lost: string[];
}

export interface IncidentSource {
  /** the file, or `transaction TXN` */
  name: string;
  transactionId: string;
  /** in replay order */
  events: IncidentEvent[];
  /** the file's content digest; null from a daemon */
  digest: string | null;
  completeness: Completeness;
  /** the calls marked as the incident's cause (computed from the events when the source marked none) */
  causes: IncidentCause[];
  /** the file's bytes, for an upload to a daemon (`--server`) */
  file: string | null;
}

const PAGE = 10_000;

/** What the incident's runs lost over its window (the agent's own count of lost events, by counter). */
export function completenessOf(runs: readonly Pick<IncidentRun, 'node' | 'counters'>[] | null): Completeness {
  if (runs === null) return { known: false, lost: [] };
  const lost = runs.flatMap((run) =>
    Object.entries(run.counters)
      .filter(([name, value]) => LOST_COUNTER_COLUMNS.includes(name) && value > 0)
      .map(([name, value]) => `node ${run.node}: ${name}=${value}`),
  );
  return { known: true, lost };
}

/** The transaction's events from the daemon: every page of GET /api/events, in replay order. */
export async function daemonIncident(server: string, transactionId: string): Promise<IncidentSource> {
  const events: IncidentEvent[] = [];
  let cursor: string | null = null;
  do {
    const query = new URLSearchParams({
      transaction_id: transactionId,
      limit: String(PAGE),
      int64: 'string',
    });
    if (cursor) query.set('cursor', cursor);
    const page: { events: Record<string, unknown>[]; next_cursor: string | null } = await requestJson(
      'GET',
      `${server}/api/events?${query}`,
    );
    for (const e of page.events)
      events.push({
        ...e,
        event_type: e.event_type as string,
        timestamp_ns: BigInt(e.timestamp_ns as string),
        duration_ns: BigInt(e.duration_ns as string),
      });
    cursor = page.next_cursor;
  } while (cursor);
  if (events.length === 0) throw new Error(`no events with transaction_id ${JSON.stringify(transactionId)}`);
  return {
    name: `transaction ${transactionId}`,
    transactionId,
    events,
    digest: null,
    completeness: { known: false, lost: [] },
    causes: incidentCauses(events),
    file: null,
  };
}

/** `incidents/*.kri` → its files, sorted; a plain path → itself. Throws when nothing matches. */
export function incidentPaths(pattern: string): string[] {
  if (!/[*?[]/.test(pattern)) return [pattern];
  const found = fs.globSync(pattern).filter((file) => fs.statSync(file).isFile());
  if (found.length === 0) throw new Error(`--incident ${pattern}: no file matches`);
  return found.sort();
}

/** The fields a replay against a build reads of each event (the rest are checked, not decoded). */
export const EXEC_FIELDS: ReadonlySet<string> = new Set([...RECORDED_CALL_FIELDS, ...MARKER_FIELDS]);

/**
 * Every incident file `pattern` names, each read and checked whole; with
 * `fields`, its events hold only those.
 */
export async function fileIncidents(
  pattern: string,
  fields?: ReadonlySet<string>,
): Promise<IncidentSource[]> {
  const sources: IncidentSource[] = [];
  for (const file of incidentPaths(pattern)) {
    const incident = fields ? await readIncidentFile(file, { fields }) : await readIncidentFile(file);
    if (incident.events.length === 0) throw new Error(`${file}: the incident holds no events`);
    sources.push({
      name: path.relative('.', file) || file,
      transactionId: incident.header.transaction_id,
      events: incident.events as unknown as IncidentEvent[],
      digest: incident.header.digest,
      completeness: completenessOf(incident.runs),
      causes: incident.header.causes ?? incidentCauses(incident.events as unknown as IncidentEvent[]),
      file,
    });
  }
  return sources;
}
