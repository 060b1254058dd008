/**
 * The events routes' answers as JSON text, from wherever the events are
 * read: built here from an EventReader (the fleet store), or built in a
 * query worker next to the node stores (query-pool.ts), so that the main
 * thread only moves the text.
 */
import type { EventReader } from '../store/event-reader';
import type { EventsQuery } from './events-query';
import { eventJson, listEventsJson } from './events-service';

/** JSON text, or its UTF-8 bytes (a query worker hands those over without a copy). */
export type JsonBody = string | Uint8Array;

export interface EventsJson {
  list(query: EventsQuery): Promise<JsonBody>;
  one(eventId: string, int64AsString: boolean): Promise<JsonBody>;
}

export function localEventsJson(reader: EventReader): EventsJson {
  return {
    list: (query) => listEventsJson(reader, query),
    one: (eventId, int64AsString) => eventJson(reader, eventId, int64AsString),
  };
}
