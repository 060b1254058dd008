/**
 * GET /api/events/export?format=incident: a transaction as an incident file
 * (core/incident). The file is built whole before anything is sent (its
 * digest covers all of it), then sent in one piece: a transaction too large
 * for an export is refused by checkExportSize before any of it is read.
 */
import type { Response } from 'express';
import { IncidentWriter, type IncidentRun, type RedactKind } from '../../../core/incident';
import { parseEventId } from '../../../core/model';
import type { EventReader } from '../../store/event-reader';
import { notFound } from '../../http/problem';
import { checkExportSize } from './export-stream';

/** Events read per page while building the file. */
const PAGE = 5000;

/** The runs of these stores over the window; null when the store keeps no runs (ClickHouse). */
export type IncidentRuns =
  ((storeIds: ReadonlySet<string>, fromNs: bigint, toNs: bigint) => IncidentRun[]) | null;

export interface IncidentExportRequest {
  transactionId: string;
  redact?: RedactKind[];
  /** seconds: SOURCE_DATE_EPOCH as the exporting CLI has it */
  sourceDateEpoch?: number;
}

/** The file's bytes, or null when the transaction has no events. */
export async function buildIncident(
  reader: EventReader,
  runs: IncidentRuns,
  req: IncidentExportRequest,
): Promise<Buffer | null> {
  const writer = new IncidentWriter({
    transactionId: req.transactionId,
    source: runs === null ? 'clickhouse' : 'node-stores',
    redact: req.redact,
    exportedAt:
      req.sourceDateEpoch === undefined ? undefined : new Date(req.sourceDateEpoch * 1000).toISOString(),
  });
  const storeIds = new Set<string>();
  const filter = { transactionId: req.transactionId };
  await checkExportSize(reader, filter);
  // the next page is read (on a query worker) while this one is added
  let page = await reader.page(filter, { limit: PAGE, order: 'asc' });
  for (;;) {
    const next = page.next && reader.page(filter, { limit: PAGE, order: 'asc', after: page.next });
    for (const event of page.events) {
      writer.add(event);
      // an id starts with its store's (core/model/event-id.ts); parsed once per store
      const store = event.event_id.slice(0, 12);
      if (!storeIds.has(store) && parseEventId(event.event_id)) storeIds.add(store);
    }
    if (!next) break;
    page = await next;
  }
  const window = writer.window();
  if (!window) return null;
  return writer.finish(runs && runs(storeIds, window.fromNs, window.toNs));
}

/** A file name for Content-Disposition: the transaction id made safe. */
function fileName(transactionId: string): string {
  return `${transactionId.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 100)}.kri`;
}

export async function sendIncident(
  reader: EventReader,
  runs: IncidentRuns,
  req: IncidentExportRequest,
  res: Response,
): Promise<void> {
  const bytes = await buildIncident(reader, runs, req);
  if (!bytes)
    throw notFound(
      'transaction-not-found',
      `no events with transaction_id ${JSON.stringify(req.transactionId)}`,
    );
  res.status(200);
  res.set({
    'Content-Type': 'application/zstd',
    'Content-Disposition': `attachment; filename="${fileName(req.transactionId)}"`,
    'Cache-Control': 'no-store',
  });
  res.end(bytes);
}
