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

/** Events to frame, in replay order, each built when asked for, and where the read after them starts. */
export interface ReplayEvents {
  length: number;
  at(i: number): ReplayEvent;
  next: EventPosition | null;
}

/** A chunk's events, framed where it arrived (its ids and texts split once). */
export function chunkEvents(chunk: ReplayChunk): ReplayEvents {
  const n = chunk.ts.length;
  const ids = n > 0 ? chunk.ids.split('\n') : [];
  const json = n > 0 ? chunk.json.split('\n') : [];
  return {
    length: n,
    at: (i) => ({
      timestamp_ns: chunk.ts[i]!,
      duration_ns: chunk.durations[i]!,
      event_id: ids[i]!,
      json: json[i]!,
    }),
    next: chunk.next,
  };
}

/**
 * A page's events, framed where it was read (a query worker): each event's text built as it is
 * framed, not joined into a chunk's one text to be split again on the same thread (~1.5 µs an
 * event of a dense read-ahead's ~11 on a slow host).
 */
export function pageEvents(page: EventPage): ReplayEvents {
  const { events } = page;
  return { length: events.length, at: (i) => toReplayEvent(events[i]!), next: page.next };
}
