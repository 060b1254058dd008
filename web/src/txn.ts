/**
 * The transaction view: loads every event of the transaction (paged with
 * the cursor), draws the timeline, and drives replay sessions. The URL holds
 * the view (#/txn/ID?from=…&to=… in epoch ns) and the session being followed
 * (&session=…), so a pasted link opens the same picture, and a second tab
 * on the same link follows the same replay.
 */
import {
  allEvents,
  exportLink,
  pageSettings,
  traceLink,
  type ApiEvent,
  type PageSettings,
  type Session,
} from './api';
import { escapeHtml, formatDuration } from './format';
import { BuildFollower } from './build-follower';
import { ReplayFollower } from './replay';
import { buildModel, type Model } from './timeline-model';
import { fieldsHtml, TimelineView, type ViewWindow } from './timeline-view';

const MAX_LOG_ROWS = 200;

export async function renderTransaction(
  root: HTMLElement,
  txn: string,
  params: URLSearchParams,
): Promise<() => void> {
  root.innerHTML = `
    <section class="toolbar">
      <h1>Transaction <code id="txn-id">${escapeHtml(txn)}</code></h1>
      <span id="txn-summary"></span>
      <label>Slow ≥ <input id="slow-ms" type="number" min="0" step="any" value="${escapeHtml(params.get('slow_ms') ?? '')}" placeholder="ms"> ms</label>
      <a class="button" id="export">Export for Perfetto</a>
    </section>
    <section class="toolbar replay">
      <strong>Replay</strong>
      <label>Speed <input id="speed" type="number" value="1" min="0.001" max="1000" step="any"></label>
      <label>Extra latency <input id="latency" type="number" value="0" min="0" step="1"> ns</label>
      <button id="create">New session</button>
      <button id="play" disabled>Play</button>
      <button id="pause" disabled>Pause</button>
      <button id="stop" disabled>Stop</button>
      <span id="session-state" data-state="none">no session</span>
      <span id="emitted-count" data-count="0"></span>
      <span id="driving" hidden></span>
    </section>
    <p class="error" id="txn-error" role="alert"></p>
    <div id="timeline-box"><p id="loading">loading…</p></div>
    <section class="below">
      <div id="pinned" class="pinned"><em>click a bar to pin its fields</em></div>
      <div id="replay-log" class="log"></div>
    </section>`;
  const $ = <T extends HTMLElement>(sel: string) => root.querySelector<T>(sel)!;
  const error = $('#txn-error');
  exportLink($<HTMLAnchorElement>('#export'), new URLSearchParams({ transaction_id: txn }), (err) => {
    error.textContent = err.message;
  });
  const box = $('#timeline-box');
  let events: ApiEvent[];
  let settings: PageSettings;
  try {
    [events, settings] = await Promise.all([
      allEvents(new URLSearchParams({ transaction_id: txn }), (n) => {
        $('#loading').textContent = `loading… ${n} events`;
      }),
      pageSettings(),
    ]);
  } catch (err) {
    error.textContent = (err as Error).message;
    return () => undefined;
  }
  if (events.length === 0) {
    box.innerHTML = `<p>No events for this transaction.</p>`;
    return () => undefined;
  }
  // timings for devtools and the benchmark (ms since navigation start)
  performance.mark('kreplay:events-loaded');
  const model: Model = buildModel(events);
  $('#txn-summary').textContent =
    `${events.length} events · ${formatDuration(model.span)} · ${model.lanes.length} lanes`;
  box.innerHTML = '';
  const hashParams = new URLSearchParams(params);
  let hashTimer = 0;
  const writeHash = () => {
    clearTimeout(hashTimer);
    hashTimer = window.setTimeout(() => {
      history.replaceState(null, '', `#/txn/${encodeURIComponent(txn)}?${hashParams}`);
    }, 150);
  };
  const toAbs = (t: number) => (model.t0 + BigInt(Math.round(t))).toString();
  const fromAbs = (text: string | null) =>
    text && /^\d{1,19}$/.test(text) ? Number(BigInt(text) - model.t0) : null;
  const from = fromAbs(params.get('from'));
  const to = fromAbs(params.get('to'));
  let follower: ReplayFollower | null = null;
  const view = new TimelineView(model, box, from !== null && to !== null && from < to ? { from, to } : null, {
    onView(v: ViewWindow) {
      hashParams.set('from', toAbs(v.from));
      hashParams.set('to', toAbs(v.to));
      writeHash();
    },
    onSeek(position) {
      follower?.seek(position).catch((err: Error) => (error.textContent = err.message));
    },
    onPin(event) {
      $('#pinned').innerHTML = event
        ? `<strong>Pinned</strong>${fieldsHtml(event, traceLink(settings, event.trace_id))}`
        : '<em>click a bar to pin its fields</em>';
    },
  });
  performance.mark('kreplay:timeline-drawn');
  const slow = $<HTMLInputElement>('#slow-ms');
  const applySlow = () => {
    const ms = Number(slow.value);
    view.slowNs = slow.value !== '' && ms >= 0 ? ms * 1e6 : Infinity;
    if (slow.value) hashParams.set('slow_ms', slow.value);
    else hashParams.delete('slow_ms');
    writeHash();
    view.requestDraw();
  };
  slow.addEventListener('input', applySlow);
  applySlow();

  // replay
  const state = $('#session-state');
  const count = $('#emitted-count');
  const log = $('#replay-log');
  let emittedCount = 0;
  let lastIndex = -1;
  let tick = 0;
  const buttons = (s: Session | null) => {
    const live = s !== null && s.state !== 'stopped';
    $<HTMLButtonElement>('#play').disabled = !live || s.state === 'playing' || s.state === 'finished';
    $<HTMLButtonElement>('#pause').disabled = !live || s.state !== 'playing';
    $<HTMLButtonElement>('#stop').disabled = !live;
  };
  const placePlayhead = () => {
    if (!follower) return;
    const next = model.events[lastIndex + 1];
    const cap = next ? Number(BigInt(next.timestamp_ns) - model.t0) : model.span;
    view.playhead = follower.position(cap);
    view.requestDraw();
  };
  const animate = () => {
    if (!follower) return;
    placePlayhead();
    tick = requestAnimationFrame(animate);
  };
  // the build a session drives, in lanes below the incident's, its first write at the start and its
  // time scaled by the session's speed, as the replay runs
  let build: BuildFollower | null = null;
  const followBuild = (s: Session) => {
    if (!s.driving || build?.transactionId === `${txn}-replay-${s.id}`) return;
    dropBuild();
    const { command } = s.driving;
    build = new BuildFollower(
      `${txn}-replay-${s.id}`,
      (buildEvents) => {
        const first = BigInt(buildEvents[0]!.timestamp_ns);
        const offset = (e: ApiEvent) => Number(BigInt(e.timestamp_ns) - first) * s.speed_factor;
        view.setModel(buildModel(events, { events: buildEvents, group: `build ${command}`, offset }));
      },
      (message) => (error.textContent = message),
    );
  };
  const dropBuild = () => {
    build?.close();
    build = null;
    if (view.model !== model) view.setModel(model);
  };
  const listener = {
    state(s: Session) {
      state.textContent = `${s.state} · ${formatDuration(s.position_ns)} of ${formatDuration(s.duration_ns)} · ${s.events_emitted}/${s.events_total}`;
      state.dataset.state = s.state;
      state.dataset.position = String(s.position_ns);
      buttons(s);
      const driving = $('#driving');
      driving.hidden = !s.driving;
      driving.textContent = s.driving ? `driving ${s.driving.command} (pid ${s.driving.pid})` : '';
      followBuild(s);
      // a stopped session's build lanes stay on view, no longer read
      if (s.state === 'stopped') build?.close();
      // the session's own position wins at once over what the page had run ahead to (a pause lands behind it)
      placePlayhead();
      if (s.state === 'stopped') {
        cancelAnimationFrame(tick);
        view.playhead = null;
        view.emitted = null;
        view.requestDraw();
      }
    },
    failed(message: string) {
      error.textContent = message;
    },
    emitted(index: number, eventId: string, lateNs: number | null) {
      const i = model.byId.get(eventId);
      if (i === undefined || !view.emitted) return;
      view.emitted[i] = 1;
      lastIndex = Math.max(lastIndex, index);
      follower?.reached(Number(BigInt(events[i]!.timestamp_ns) - model.t0));
      emittedCount++;
      count.textContent = `${emittedCount} events emitted`;
      count.dataset.count = String(emittedCount);
      const e = events[i]!;
      const row = document.createElement('div');
      row.className = 'log-row';
      row.textContent = `#${index} +${formatDuration(Number(BigInt(e.timestamp_ns) - model.t0))} ${e.event_type} ${e.service_name} ${e.comm} · late ${lateNs === null ? '?' : formatDuration(lateNs)}`;
      log.prepend(row);
      while (log.childElementCount > MAX_LOG_ROWS) log.lastElementChild!.remove();
    },
  };
  const attach = (f: ReplayFollower) => {
    follower?.close();
    if (build && build.transactionId !== `${txn}-replay-${f.session!.id}`) dropBuild();
    follower = f;
    view.emitted = new Uint8Array(model.events.length);
    emittedCount = 0;
    lastIndex = -1;
    log.innerHTML = '';
    hashParams.set('session', f.session!.id);
    writeHash();
    cancelAnimationFrame(tick);
    animate();
  };
  const act = (p: Promise<unknown>) => p.catch((err: Error) => (error.textContent = err.message));
  $('#create').addEventListener('click', () => {
    error.textContent = '';
    void act(
      ReplayFollower.create(
        txn,
        Number($<HTMLInputElement>('#speed').value),
        Number($<HTMLInputElement>('#latency').value),
        listener,
      ).then(attach),
    );
  });
  $('#play').addEventListener('click', () => void act(follower!.act('play')));
  $('#pause').addEventListener('click', () => void act(follower!.act('pause')));
  $('#stop').addEventListener('click', () => void act(follower!.act('stop')));
  const sessionId = params.get('session');
  if (sessionId) await act(ReplayFollower.join(sessionId, listener).then(attach));
  // for tests and the benchmark: what was drawn, how fast
  Object.assign(window, { kreplayTimeline: view });
  return () => {
    cancelAnimationFrame(tick);
    follower?.close();
    build?.close();
  };
}
