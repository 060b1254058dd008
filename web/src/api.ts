/** The public HTTP API, as the page uses it: nothing private, integers as strings so no ns is rounded. */
import { authHeaders, hasToken } from './auth';

export interface ApiEvent {
  event_id: string;
  event_type: 'sys_write' | 'sys_read' | 'sys_fsync' | 'sys_connect' | 'block_io';
  timestamp_ns: string;
  duration_ns: string;
  service_name: string;
  transaction_id: string | null;
  trace_id: string | null;
  node: string;
  pid: number;
  tid: number;
  comm: string;
  bytes: number;
  syscall?: string;
  fd?: number;
  ret?: number;
  target_kind?: string | null;
  target?: string | null;
  /** sys_read: the peer's response time, ns */
  response_ns?: string | null;
  device?: string;
  sector?: number;
  op?: string;
  error?: number;
  /** the span of the traceparent that set the event's context */
  parent_span_id?: string;
}

/** GET /api/page-settings */
export interface PageSettings {
  /** a trace viewer's URL with {trace_id} where the trace id goes (the daemon's --trace-url), or null */
  trace_url: string | null;
}

export interface EventsPage {
  events: ApiEvent[];
  next_cursor: string | null;
}

export interface Session {
  id: string;
  transaction_id: string;
  speed_factor: number;
  extra_latency_ns: number;
  state: 'ready' | 'playing' | 'paused' | 'finished' | 'stopped';
  position_ns: number;
  duration_ns: number;
  events_total: number;
  events_emitted: number;
  /** the test build a `kreplay replay --exec` session drives, when it does */
  driving?: { command: string; pid: number } | null;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    headers: { ...authHeaders(), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) {
    let detail = text.slice(0, 300);
    try {
      const problem = JSON.parse(text) as { detail?: string };
      detail = problem.detail ?? detail;
    } catch {
      // not problem+json: show the text
    }
    const hint = res.status === 401 ? ' (enter a token at the top right)' : '';
    throw new ApiError(res.status, `${res.status}: ${detail}${hint}`);
  }
  return JSON.parse(text) as T;
}

export function pageSettings(): Promise<PageSettings> {
  return request<PageSettings>('GET', '/api/page-settings');
}

/** An event's trace in the trace viewer the daemon names, or null (no viewer, no trace). */
export function traceLink(settings: PageSettings, traceId: string | null): string | null {
  if (settings.trace_url === null || traceId === null) return null;
  return settings.trace_url.replaceAll('{trace_id}', encodeURIComponent(traceId));
}

export function eventsPage(params: URLSearchParams): Promise<EventsPage> {
  const query = new URLSearchParams(params);
  query.set('int64', 'string');
  return request('GET', `/api/events?${query}`);
}

/** Every event matching `params`, page after page; `progress` sees the count so far. */
export async function allEvents(params: URLSearchParams, progress: (n: number) => void): Promise<ApiEvent[]> {
  const query = new URLSearchParams(params);
  query.set('limit', '10000');
  const events: ApiEvent[] = [];
  for (;;) {
    const page = await eventsPage(query);
    for (const e of page.events) events.push(e);
    progress(events.length);
    if (!page.next_cursor) return events;
    query.set('cursor', page.next_cursor);
  }
}

export const createSession = (transactionId: string, speed: number, extraLatencyNs: number) =>
  request<Session>('POST', '/api/replay/sessions', {
    transaction_id: transactionId,
    speed_factor: speed,
    extra_latency_ns: extraLatencyNs,
  });

export const getSession = (id: string) =>
  request<Session>('GET', `/api/replay/sessions/${encodeURIComponent(id)}`);

export const control = (id: string, action: 'play' | 'pause' | 'stop' | 'seek', body?: unknown) =>
  request<Session>('POST', `/api/replay/sessions/${encodeURIComponent(id)}/${action}`, body ?? {});

/** An incident file the daemon serves (GET /api/incidents). */
export interface IncidentEntry {
  id: string;
  file: string;
  origin: 'dropped' | 'uploaded';
  transaction_id: string;
  events: number;
  digest: string;
  exported_at: string;
  kreplay_version: string;
  source: string;
  redacted: string[];
  runs: number | null;
}

export interface IncidentList {
  incidents: IncidentEntry[];
  skipped: { file: string; reason: string }[];
}

export const listIncidents = () => request<IncidentList>('GET', '/api/incidents');

/** Uploads an incident file's bytes as they are (POST /api/incidents). */
export async function uploadIncident(file: Blob): Promise<{ id: string; transaction_id: string }> {
  const res = await fetch('/api/incidents', {
    method: 'POST',
    headers: { ...authHeaders(), 'content-type': 'application/octet-stream' },
    body: file,
  });
  const text = await res.text();
  if (!res.ok) {
    const detail = (() => {
      try {
        return (JSON.parse(text) as { detail?: string }).detail ?? text;
      } catch {
        return text;
      }
    })();
    throw new ApiError(res.status, `${res.status}: ${detail.slice(0, 300)}`);
  }
  return JSON.parse(text) as { id: string; transaction_id: string };
}

export const exportUrl = (params: URLSearchParams) => {
  const query = new URLSearchParams(params);
  for (const key of ['limit', 'cursor', 'order', 'int64']) query.delete(key);
  query.set('format', 'chrome-trace');
  return `/api/events/export?${query}`;
};

/**
 * An export link: followed as it is when no token is needed (the browser
 * streams the file to disk); with a token, fetched with it and saved from memory.
 */
export function exportLink(
  link: HTMLAnchorElement,
  params: URLSearchParams,
  report: (e: Error) => void,
): void {
  link.href = exportUrl(params);
  link.download = '';
  link.addEventListener('click', (ev) => {
    if (!hasToken()) return;
    ev.preventDefault();
    void (async () => {
      const res = await fetch(link.href, { headers: authHeaders() });
      if (!res.ok) throw new ApiError(res.status, `${res.status}: ${(await res.text()).slice(0, 300)}`);
      const name =
        /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? 'kreplay.json';
      const url = URL.createObjectURL(await res.blob());
      const save = Object.assign(document.createElement('a'), { href: url, download: name });
      save.click();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    })().catch(report);
  });
}
