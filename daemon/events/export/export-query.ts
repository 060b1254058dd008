/** The query string of GET /api/events/export: the filters of GET /api/events and a format. */
import { z } from 'zod';
import { choiceParam, parsedParam } from '../../http/query-params';
import { parseIntegerIn, parseRedactKinds } from '../../http/query-values';
import { checkTimeWindow, eventFilterParams } from '../events-query';
import { EXPORT_FORMATS } from './export-formats';

/** The filter an incident export takes: its transaction, nothing narrower (it holds the whole transaction). */
const INCIDENT_PARAMS = new Set(['format', 'transaction_id', 'redact', 'source_date_epoch']);
const INCIDENT_ONLY = ['redact', 'source_date_epoch'] as const;

function checkIncidentParams(q: Record<string, unknown>, ctx: z.RefinementCtx): void {
  if (q.format === 'incident') {
    if (q.transaction_id === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['transaction_id'],
        message: 'format=incident exports one transaction: give its id',
      });
    for (const [key, value] of Object.entries(q))
      if (value !== undefined && !INCIDENT_PARAMS.has(key))
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: 'an incident holds the whole transaction: no other filter applies',
        });
  } else {
    for (const key of INCIDENT_ONLY)
      if (q[key] !== undefined)
        ctx.addIssue({ code: 'custom', path: [key], message: 'applies to format=incident only' });
  }
}

/** More events than this would be a file no trace viewer opens: the export answers 413 instead. */
export const MAX_EXPORT_EVENTS = 1_000_000;

export const exportQuerySchema = z
  .strictObject({
    ...eventFilterParams,
    format: choiceParam(EXPORT_FORMATS).optional(),
    redact: parsedParam(parseRedactKinds)
      .meta({
        description: 'format=incident: comma-separated paths, peers, services replaced by stable tokens',
      })
      .optional(),
    source_date_epoch: parsedParam(parseIntegerIn(0, 253402300799))
      .meta({
        description:
          'format=incident: the export time to write (seconds since the epoch), for byte-identical exports',
      })
      .optional(),
  })
  .superRefine(checkTimeWindow)
  .superRefine(checkIncidentParams);

export type ExportQuery = z.output<typeof exportQuerySchema>;
