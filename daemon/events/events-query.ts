/** The query string of GET /api/events and the filter it stands for. */
import { z } from 'zod';
import { choiceParam, parsedParam } from '../http/query-params';
import {
  parseDurationMsNs,
  parseEventTypes,
  parseIntegerIn,
  parseTargetKinds,
  parseTargetPattern,
  parseText,
  parseTimeNs,
} from '../http/query-values';
import { EVENT_TYPES } from '../../core/model/event-types';
import { CONTAINER_ID_PREFIX } from '../../core/model/container';
import type { EventFilter } from '../store/event-filter';
import { decodeCursor, filterHash } from './events-cursor';

export const DEFAULT_LIMIT = 1000;
export const MAX_LIMIT = 10_000;

/** ?int64=string writes timestamp_ns and duration_ns as strings, for clients that would round numbers. */
export const int64Param = choiceParam(['number', 'string'] as const).meta({
  description: 'string: timestamp_ns and duration_ns as strings, for clients that would round numbers',
});

const text = parsedParam(parseText);
const time = (description: string) =>
  parsedParam(parseTimeNs).meta({
    description: `${description}: epoch nanoseconds, or RFC 3339 with up to 9 fractional digits`,
  });

/** The filter parameters: GET /api/events and its export take the same ones. */
export const eventFilterParams = {
  transaction_id: text.optional(),
  trace_id: text.optional(),
  service: text.optional(),
  node: text.optional(),
  event_type: parsedParam(parseEventTypes)
    .meta({ description: `comma-separated: ${EVENT_TYPES.join(', ')}` })
    .optional(),
  from: time('inclusive start').optional(),
  to: time('exclusive end').optional(),
  min_duration_ms: parsedParam(parseDurationMsNs)
    .meta({
      description:
        "decimal milliseconds, exact to the nanosecond: events whose duration_ns, or (a socket read's) response_ns, the upstream's wait, reaches it",
    })
    .optional(),
  target: parsedParam(parseTargetPattern).meta({ description: 'exact, or a prefix ending in *' }).optional(),
  target_kind: parsedParam(parseTargetKinds)
    .meta({ description: 'comma-separated: file, socket, pipe, char, anon, other' })
    .optional(),
  container: text
    .meta({
      description: `events of a container: its name, its id, or an id prefix of ${CONTAINER_ID_PREFIX}+ characters`,
    })
    .optional(),
  pod: text.meta({ description: "events of a Kubernetes pod's containers, by the pod's name" }).optional(),
  namespace: text.meta({ description: 'events of the containers of a Kubernetes namespace' }).optional(),
  image: text
    .meta({ description: "events of containers of an image, by the runtime's image name" })
    .optional(),
};

/** from must come before to. */
export function checkTimeWindow(q: { from?: bigint; to?: bigint }, ctx: z.RefinementCtx): void {
  if (q.from !== undefined && q.to !== undefined && q.from >= q.to)
    ctx.addIssue({ code: 'custom', path: ['from'], message: 'must be earlier than to' });
}

export const eventsQuerySchema = z
  .strictObject({
    ...eventFilterParams,
    limit: parsedParam(parseIntegerIn(1, MAX_LIMIT))
      .meta({ description: `1..${MAX_LIMIT}, default ${DEFAULT_LIMIT}` })
      .optional(),
    cursor: parsedParam(decodeCursor)
      .meta({ description: 'next_cursor of the previous page, unchanged' })
      .optional(),
    order: choiceParam(['asc', 'desc'] as const).optional(),
    int64: int64Param.optional(),
  })
  .superRefine((q, ctx) => {
    checkTimeWindow(q, ctx);
    if (!q.cursor) return;
    if (q.order !== undefined && q.order !== q.cursor.order)
      ctx.addIssue({ code: 'custom', path: ['cursor'], message: `was made for order=${q.cursor.order}` });
    if (q.cursor.filterHash !== filterHash(toFilter(q)))
      ctx.addIssue({ code: 'custom', path: ['cursor'], message: 'was made for a query with other filters' });
  });

export type EventsQuery = z.output<typeof eventsQuerySchema>;

type FilterQuery = { [K in keyof typeof eventFilterParams]?: z.output<(typeof eventFilterParams)[K]> };

export function toFilter(q: FilterQuery): EventFilter {
  const filter: EventFilter = {};
  if (q.transaction_id !== undefined) filter.transactionId = q.transaction_id;
  if (q.trace_id !== undefined) filter.traceId = q.trace_id;
  if (q.service !== undefined) filter.service = q.service;
  if (q.node !== undefined) filter.node = q.node;
  if (q.event_type !== undefined) filter.types = q.event_type;
  if (q.from !== undefined) filter.fromNs = q.from;
  if (q.to !== undefined) filter.toNs = q.to;
  if (q.min_duration_ms !== undefined) filter.minDurationNs = q.min_duration_ms;
  if (q.target !== undefined) filter.target = q.target;
  if (q.target_kind !== undefined) filter.targetKinds = q.target_kind;
  if (q.container !== undefined) filter.container = q.container;
  if (q.pod !== undefined) filter.pod = q.pod;
  if (q.namespace !== undefined) filter.namespace = q.namespace;
  if (q.image !== undefined) filter.image = q.image;
  return filter;
}
