/**
 * Builds an incident file from a transaction's events as they are read (in
 * replay order), redacting on the way; nothing but the columns is kept.
 */
import type { ApiEvent } from '../model/event';
import { VERSION } from '../version';
import { ColumnsBuilder, type EventObject } from './event-columns';
import { CauseFinder } from './incident-causes';
import { encodeIncident } from './incident-codec';
import type { IncidentHeader, IncidentRun, RedactKind } from './incident-types';
import { Redactor } from './redaction';

export interface IncidentWriterOptions {
  transactionId: string;
  source: IncidentHeader['source'];
  redact?: readonly RedactKind[];
  /** ISO 8601; default exportTime(process.env) */
  exportedAt?: string;
}

/**
 * The export time: SOURCE_DATE_EPOCH (seconds, the reproducible-builds
 * convention) when set, so that exports of the same transaction are
 * byte-identical; else now.
 */
export function exportTime(env: NodeJS.ProcessEnv = process.env, now = Date.now()): string {
  const epoch = env.SOURCE_DATE_EPOCH;
  if (epoch !== undefined && /^\d{1,12}$/.test(epoch)) return new Date(Number(epoch) * 1000).toISOString();
  return new Date(now).toISOString();
}

export class IncidentWriter {
  private readonly columns = new ColumnsBuilder();
  private readonly redactor: Redactor;
  private readonly causes = new CauseFinder();
  private firstNs: bigint | null = null;
  private endNs: bigint | null = null;

  constructor(private readonly options: IncidentWriterOptions) {
    this.redactor = new Redactor(options.redact ?? []);
  }

  get count(): number {
    return this.columns.count;
  }

  /** The next event in replay order (its container, an object, as its JSON text: columns hold scalars). */
  add(event: ApiEvent): void {
    this.firstNs ??= event.timestamp_ns;
    const end = event.timestamp_ns + event.duration_ns;
    if (this.endNs === null || end > this.endNs) this.endNs = end;
    this.causes.add(event);
    this.columns.add(this.redactor.event(incidentFields(event)));
  }

  /** The incident's window: where its runs and their counters are looked up. */
  window(): { fromNs: bigint; toNs: bigint } | null {
    return this.firstNs === null ? null : { fromNs: this.firstNs, toNs: this.endNs! };
  }

  /** The file's bytes, with the runs the recording had (null: unknown). */
  finish(runs: IncidentRun[] | null): Buffer {
    const redacted = [...new Set(this.options.redact ?? [])].sort();
    const header = {
      transaction_id: this.options.transactionId,
      kreplay_version: VERSION,
      exported_at: this.options.exportedAt ?? exportTime(),
      source: this.options.source,
      events: this.columns.count,
      first_ns: this.firstNs,
      end_ns: this.endNs,
      redacted,
      causes: this.causes.finish(),
    };
    // a run's capture filter names services and paths: a redacted file does not show it
    const shown =
      runs &&
      (this.redactor.active
        ? runs.map((r) => ({ ...r, filter: r.filter === null ? null : 'redacted' }))
        : runs);
    return encodeIncident(header, shown, this.columns.finish());
  }
}

/** An event as an incident file's columns hold it: every field a scalar, the container as its JSON. */
function incidentFields(event: ApiEvent): EventObject {
  if (event.container === undefined) return event as unknown as EventObject;
  return { ...(event as unknown as EventObject), container: JSON.stringify(event.container) };
}
