/**
 * Search: every filter of GET /api/events, results in a virtualised table
 * (only the rows in view exist in the DOM) that fetches the next page with
 * the cursor as the user scrolls; the time column sorts (order=asc|desc),
 * the one order the API keeps across pages.
 */
import { eventsPage, exportLink, type ApiEvent } from './api';
import { escapeHtml, formatDuration, formatTime, isTimeText } from './format';

const ROW_HEIGHT = 26;
const PAGE_SIZE = 500;

const FILTERS: [param: string, label: string, placeholder: string][] = [
  ['transaction_id', 'Transaction', 'transaction id'],
  ['trace_id', 'Trace', 'trace id'],
  ['service', 'Service', 'service name'],
  ['node', 'Node', 'node'],
  ['event_type', 'Type', 'sys_read,sys_fsync'],
  ['from', 'From', '2026-11-22T09:30:00Z'],
  ['to', 'To', '2026-11-22T09:31:00.5Z'],
  ['min_duration_ms', 'Min duration (ms)', '0.25'],
  ['target', 'Target', '/var/lib/app/*'],
  ['target_kind', 'Target kind', 'file,socket'],
];

const COLUMNS = [
  'Time (UTC)',
  'Type',
  'Duration',
  'Service',
  'Node',
  'Thread',
  'Transaction',
  'What',
  'Bytes',
];

function cells(e: ApiEvent): string[] {
  const what =
    e.event_type === 'block_io'
      ? `${e.op} ${e.device} @${e.sector}`
      : `${e.syscall} fd ${e.fd} ${e.target ?? ''}`;
  return [
    formatTime(BigInt(e.timestamp_ns)),
    e.event_type,
    formatDuration(Number(e.duration_ns)),
    e.service_name,
    e.node,
    `${e.comm} ${e.pid}/${e.tid}`,
    e.transaction_id ?? '',
    what,
    String(e.bytes),
  ];
}

export function renderSearch(
  root: HTMLElement,
  params: URLSearchParams,
  navigate: (hash: string) => void,
): void {
  root.innerHTML = `
    <form class="filters" id="filters">
      ${FILTERS.map(
        ([p, label, ph]) =>
          `<label>${label}<input name="${p}" placeholder="${escapeHtml(ph)}" value="${escapeHtml(params.get(p) ?? '')}"></label>`,
      ).join('')}
      <button type="submit">Search</button>
      <a id="export-link" class="button" href="#">Export trace</a>
    </form>
    <p id="search-error" class="error" role="alert"></p>
    <div class="table" id="results">
      <div class="thead">${COLUMNS.map((c, i) => `<span class="c${i}${i === 0 ? ' sortable' : ''}" data-col="${i}">${c}</span>`).join('')}</div>
      <div class="viewport" id="viewport"><div class="spacer" id="spacer"></div><div class="rows" id="rows"></div></div>
    </div>
    <p id="search-count"></p>`;
  const form = root.querySelector<HTMLFormElement>('#filters')!;
  const error = root.querySelector<HTMLElement>('#search-error')!;
  const viewport = root.querySelector<HTMLElement>('#viewport')!;
  const spacer = root.querySelector<HTMLElement>('#spacer')!;
  const rowsEl = root.querySelector<HTMLElement>('#rows')!;
  const count = root.querySelector<HTMLElement>('#search-count')!;
  const order = params.get('order') === 'desc' ? 'desc' : 'asc';
  const timeHeader = root.querySelector<HTMLElement>('[data-col="0"]')!;
  timeHeader.textContent += order === 'asc' ? ' ▲' : ' ▼';
  exportLink(root.querySelector<HTMLAnchorElement>('#export-link')!, params, (err) => {
    error.textContent = err.message;
  });

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const next = new URLSearchParams();
    for (const [p] of FILTERS) {
      const value = (form.elements.namedItem(p) as HTMLInputElement).value.trim();
      if (value) next.set(p, value);
    }
    for (const p of ['from', 'to']) {
      const value = next.get(p);
      if (value && !isTimeText(value)) {
        error.textContent = `${p}: expected RFC 3339 (2026-11-22T09:30:00.123Z) or epoch ns`;
        return;
      }
    }
    if (order === 'desc') next.set('order', 'desc');
    navigate(`#/search?${next}`);
  });
  timeHeader.addEventListener('click', () => {
    const next = new URLSearchParams(params);
    if (order === 'asc') next.set('order', 'desc');
    else next.delete('order');
    navigate(`#/search?${next}`);
  });

  const events: ApiEvent[] = [];
  let cursor: string | null = null;
  let loading = false;
  let done = false;
  const query = new URLSearchParams(params);
  query.set('limit', String(PAGE_SIZE));

  const draw = () => {
    spacer.style.height = `${events.length * ROW_HEIGHT}px`;
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW_HEIGHT) - 5);
    const last = Math.min(events.length, first + Math.ceil(viewport.clientHeight / ROW_HEIGHT) + 10);
    let html = '';
    for (let i = first; i < last; i++) {
      const e = events[i]!;
      const link = e.transaction_id ? ` data-txn="${escapeHtml(e.transaction_id)}"` : '';
      html += `<div class="row" style="top:${i * ROW_HEIGHT}px"${link} data-id="${e.event_id}">${cells(e)
        .map((c, j) => `<span class="c${j}" title="${escapeHtml(c)}">${escapeHtml(c)}</span>`)
        .join('')}</div>`;
    }
    rowsEl.innerHTML = html;
    count.textContent = `${events.length}${done ? '' : '+'} event${events.length === 1 ? '' : 's'}`;
    if (!done && !loading && last >= events.length - 20) void more();
  };
  const more = async () => {
    loading = true;
    try {
      if (cursor) query.set('cursor', cursor);
      const page = await eventsPage(query);
      events.push(...page.events);
      cursor = page.next_cursor;
      done = cursor === null;
    } catch (err) {
      error.textContent = (err as Error).message;
      done = true;
    } finally {
      loading = false;
    }
    draw();
  };
  viewport.addEventListener('scroll', () => requestAnimationFrame(draw));
  rowsEl.addEventListener('click', (ev) => {
    const row = (ev.target as HTMLElement).closest<HTMLElement>('.row');
    const txn = row?.dataset.txn;
    if (txn) navigate(`#/txn/${encodeURIComponent(txn)}`);
  });
  void more();
}
