/** Answers event queries from the event store as JSON text with exact 19-digit integers. */
import { int64Json } from '../../core/json/exact-json';
import { eventToJson, parseEventId } from '../../core/model';
import { badRequest, notFound } from '../http/problem';
import type { EventReader } from '../store/event-reader';
import { encodeCursor, filterHash } from './events-cursor';
import { DEFAULT_LIMIT, toFilter, type EventsQuery } from './events-query';

export async function listEventsJson(stores: EventReader, query: EventsQuery): Promise<string> {
  const filter = toFilter(query);
  const order = query.order ?? query.cursor?.order ?? 'asc';
  const page = await stores.page(filter, {
    limit: query.limit ?? DEFAULT_LIMIT,
    order,
    after: query.cursor?.after,
  });
  const asStrings = query.int64 === 'string';
  const events = page.events.map((event) => eventToJson(event, asStrings)).join(',');
  const next = page.next && encodeCursor({ order, after: page.next, filterHash: filterHash(filter) });
  // Said when the range asked for reaches before what retention kept: an empty page there is pruned, not quiet.
  const retained = await stores.retainedFrom(filter);
  const reachesBefore = retained !== null && (filter.fromNs === undefined || filter.fromNs < retained);
  const int64 = (n: bigint | null) => (n === null ? 'null' : int64Json(n, asStrings));
  const retainedJson = reachesBefore ? `,"retained_from_ns":${int64(retained)}` : '';
  // Said when the answer reaches into runs that sampled: their writes without a transaction are one in N.
  const sampled = await stores.sampledRanges(filter);
  const sampledJson = sampled.length
    ? `,"sampled":[${sampled
        .map(
          (r) =>
            `{"node":${JSON.stringify(r.node)},"from_ns":${int64(r.fromNs)},"to_ns":${int64(r.toNs)},"one_in":${r.oneIn}}`,
        )
        .join(',')}]`
    : '';
  return `{"events":[${events}],"next_cursor":${JSON.stringify(next)}${retainedJson}${sampledJson}}`;
}

export async function eventJson(
  stores: EventReader,
  eventId: string,
  int64AsString: boolean,
): Promise<string> {
  if (!parseEventId(eventId))
    throw badRequest([
      { param: 'event_id', message: 'malformed: expected the 40 hex digits of an event_id' },
    ]);
  const event = await stores.get(eventId);
  if (!event) throw notFound('event-not-found', `no event ${eventId}`);
  return eventToJson(event, int64AsString);
}
