/** The query string of GET /api/events/export: the filters of GET /api/events and a format. */
import { z } from 'zod';
import { choiceParam } from '../../http/query-params';
import { checkTimeWindow, eventFilterParams } from '../events-query';

export const EXPORT_FORMATS = ['chrome-trace'] as const;

/** More events than this would be a file no trace viewer opens: the export answers 413 instead. */
export const MAX_EXPORT_EVENTS = 1_000_000;

export const exportQuerySchema = z
  .strictObject({
    ...eventFilterParams,
    format: choiceParam(EXPORT_FORMATS).optional(),
  })
  .superRefine(checkTimeWindow);

export type ExportQuery = z.output<typeof exportQuerySchema>;
