/**
 * Streams an export: events read a page at a time by keyset from whichever
 * store the daemon reads (node files or ClickHouse), turned into trace text
 * (a Chrome trace, or OTLP/JSON) and written with backpressure, so memory
 * stays bounded by a page whatever the size of the export.
 */
import { once } from 'node:events';
import type { Response } from 'express';
import type { ApiEvent } from '../../../core/model';
import type { EventFilter, EventPosition } from '../../store/event-filter';
import type { EventReader } from '../../store/event-reader';
import { ProblemError } from '../../http/problem';
import { ChromeTraceWriter } from './chrome-trace';
import { MAX_EXPORT_EVENTS } from './export-query';
import { OtlpJsonWriter } from './otlp-export';

/** Events read per page, and about how much text is handed to the socket at once. */
const CHUNK_EVENTS = 1000;
const FLUSH_BYTES = 64 * 1024;

/** A file name for Content-Disposition: the transaction or trace id when there is one, made safe. */
function fileName(filter: EventFilter, suffix: string): string {
  const id = (filter.transactionId ?? filter.traceId ?? 'events').replace(/[^A-Za-z0-9._-]/g, '_');
  return `kreplay-${id.slice(0, 100)}${suffix}.json`;
}

/** A trace file made a page of events at a time. */
interface TraceWriter {
  begin(): string;
  add(events: readonly ApiEvent[]): string;
  end(events: number): string;
}

function chromeTrace(): TraceWriter {
  const trace = new ChromeTraceWriter();
  return {
    begin: () => trace.begin(),
    add: (events) => events.map((e) => trace.add(e)).join(''),
    end: (events) => trace.end({ source: 'kreplay', events, flows: trace.flows }),
  };
}

function otlpJson(): TraceWriter {
  const otlp = new OtlpJsonWriter();
  return { begin: () => otlp.begin(), add: (events) => otlp.add(events), end: () => otlp.end() };
}

export const TRACE_FORMATS = {
  'chrome-trace': { make: chromeTrace, suffix: '' },
  otlp: { make: otlpJson, suffix: '.otlp' },
} as const;

/** Throws the 413 before anything is sent when the filter matches more than the cap. */
export async function checkExportSize(events: EventReader, filter: EventFilter): Promise<number> {
  const { count } = await events.summarize(filter);
  if (count > MAX_EXPORT_EVENTS)
    throw new ProblemError(
      'export-too-large',
      `the filters match ${count} events; an export holds at most ${MAX_EXPORT_EVENTS}: narrow them (from/to, event_type, service)`,
    );
  return count;
}

/** Streams the events of `filter` as a trace file of `format`: a Chrome trace, or OTLP/JSON. */
export async function streamTrace(
  reader: EventReader,
  filter: EventFilter,
  format: keyof typeof TRACE_FORMATS,
  res: Response,
): Promise<void> {
  const count = await checkExportSize(reader, filter);
  res.status(200);
  res.set({
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Disposition': `attachment; filename="${fileName(filter, TRACE_FORMATS[format].suffix)}"`,
    'Cache-Control': 'no-store',
    // what the filter matched when the export began: an OTLP file leaves out events of no W3C trace
    'X-Kreplay-Events': String(count),
  });
  let closed = false;
  res.once('close', () => (closed = true));
  const trace = TRACE_FORMATS[format].make();
  let pending = trace.begin();
  let events = 0;
  const flush = async () => {
    if (!res.write(pending)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
    pending = '';
  };
  let after: EventPosition | undefined;
  // events appended after the size check could push past the cap: stop at it
  while (!closed && events < MAX_EXPORT_EVENTS) {
    const page = await reader.page(filter, {
      limit: Math.min(CHUNK_EVENTS, MAX_EXPORT_EVENTS - events),
      order: 'asc',
      after,
    });
    pending += trace.add(page.events);
    events += page.events.length;
    if (pending.length >= FLUSH_BYTES) await flush();
    // node files answer synchronously: let other requests in between pages
    else await new Promise(setImmediate);
    if (!page.next) break;
    after = page.next;
  }
  if (closed) return;
  pending += trace.end(events);
  res.end(pending);
}
