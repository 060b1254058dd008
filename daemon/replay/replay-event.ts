/**
 * What replay needs of an event: its place in time and order, its duration
 * (the schedule stretches it) and its JSON text. Where a session reads ahead
 * through the query workers, the workers build the text and send a chunk of
 * events as columns, so the main thread neither runs SQL nor builds JSON
 * for a playing session.
 */
import { eventToJson, type ApiEvent } from '../../core/model';
import type { EventPage, EventPosition } from '../store/event-filter';

export interface ReplayEvent {
  timestamp_ns: bigint;
  duration_ns: bigint;
  event_id: string;
  /** eventToJson's text of the event */
  json: string;
}

export function toReplayEvent(event: ApiEvent): ReplayEvent {
  return {
    timestamp_ns: event.timestamp_ns,
    duration_ns: event.duration_ns,
    event_id: event.event_id,
    json: eventToJson(event),
  };
}

/** A page of events for replay, as columns; ids and texts joined by newlines (neither holds one). */
export interface ReplayChunk {
  ts: BigInt64Array;
  durations: BigInt64Array;
  ids: string;
  json: string;
  next: EventPosition | null;
}

/** In a query worker: a page as a chunk. */
export function toReplayChunk(page: EventPage): ReplayChunk {
  const { events } = page;
  const ts = new BigInt64Array(events.length);
  const durations = new BigInt64Array(events.length);
  events.forEach((event, i) => {
    ts[i] = event.timestamp_ns;
    durations[i] = event.duration_ns;
  });
  return {
    ts,
    durations,
    ids: events.map((event) => event.event_id).join('\n'),
    json: events.map((event) => eventToJson(event)).join('\n'),
    next: page.next,
  };
}

/** Where a page is framed: the chunk's event `i`, built when asked for (its ids and texts split once). */
export function chunkEvents(chunk: ReplayChunk): (i: number) => ReplayEvent {
  const n = chunk.ts.length;
  const ids = n > 0 ? chunk.ids.split('\n') : [];
  const json = n > 0 ? chunk.json.split('\n') : [];
  return (i) => ({
    timestamp_ns: chunk.ts[i]!,
    duration_ns: chunk.durations[i]!,
    event_id: ids[i]!,
    json: json[i]!,
  });
}
