/**
 * The transaction timeline on a canvas: one row per lane, each event a bar
 * at its time with its duration. Drawing walks each lane's events in the
 * visible window only and skips bars that would land on a pixel already
 * painted, so 100,000 events cost about one fillRect per pixel column per
 * lane. Wheel zooms about the pointer (down to a few ns per pixel), dragging
 * pans, hovering shows an event's fields, a click pins them; a minimap shows
 * the whole span and where the view is.
 */
import type { ApiEvent } from './api';
import { escapeHtml, formatDuration, formatTime } from './format';
import { firstVisible, type Model } from './timeline-model';

const LABEL_W = 220;
const AXIS_H = 24;
const LANE_H = 22;
const GROUP_H = 18;
const MIN_SPAN_NS = 1000;
/** One colour per event type; slow calls red, failed ones (ret or error < 0) purple whatever their type. */
const COLORS = {
  sys_write: '#3b82f6',
  sys_read: '#10b981',
  sys_fsync: '#8b5cf6',
  sys_connect: '#06b6d4',
  block_io: '#f59e0b',
  slow: '#dc2626',
  failed: '#86198f',
  pinned: '#111827',
};

function failed(e: ApiEvent): boolean {
  return (e.ret ?? 0) < 0 || (e.error ?? 0) < 0;
}

export interface ViewWindow {
  from: number;
  to: number;
}

export interface TimelineOptions {
  onView(view: ViewWindow): void;
  onSeek(positionNs: number): void;
  onPin(event: ApiEvent | null): void;
}

export class TimelineView {
  readonly canvas = document.createElement('canvas');
  readonly minimap = document.createElement('canvas');
  readonly tooltip = document.createElement('div');
  view: ViewWindow;
  slowNs = Infinity;
  /** replay progress: null when no session; else which events were emitted and the playhead */
  emitted: Uint8Array | null = null;
  playhead: number | null = null;
  pinned: number | null = null;
  private laneTop: number[] = [];
  private height = 0;
  /** a pan, or the playhead being dragged to `seekTo` (the view owns it until the drop, not the replay) */
  private drag: { x: number; from: number; to: number; moved: boolean; seekTo: number | null } | null = null;
  private frame = 0;
  private minimapImage: HTMLCanvasElement | null = null;
  /** how long the last draw took, in ms (shown, and read by the benchmark) */
  lastDrawMs = 0;

  constructor(
    public model: Model,
    container: HTMLElement,
    view: ViewWindow | null,
    private readonly options: TimelineOptions,
  ) {
    this.view = view ?? { from: -model.span * 0.02, to: model.span * 1.02 };
    this.layout();
    this.canvas.className = 'timeline';
    this.minimap.className = 'minimap';
    this.tooltip.className = 'tooltip';
    this.tooltip.hidden = true;
    container.append(this.minimap, this.canvas, this.tooltip);
    this.listen();
    new ResizeObserver(() => this.resize()).observe(container);
    this.resize();
  }

  private layout(): void {
    let y = AXIS_H;
    this.laneTop = [];
    for (const lane of this.model.lanes) {
      if (lane.group) y += GROUP_H;
      this.laneTop.push(y);
      y += LANE_H;
    }
    this.height = y + 4;
  }

  /** A model with more events after the same ones (a driven build's writes): indexes stay valid. */
  setModel(model: Model): void {
    this.model = model;
    if (this.emitted && this.emitted.length < model.events.length) {
      const emitted = new Uint8Array(model.events.length);
      emitted.set(this.emitted);
      this.emitted = emitted;
    }
    this.layout();
    this.resize();
  }

  private get width(): number {
    return this.canvas.clientWidth;
  }

  private scale(): number {
    return (this.width - LABEL_W) / (this.view.to - this.view.from);
  }

  xOf(t: number): number {
    return LABEL_W + (t - this.view.from) * this.scale();
  }

  tOf(x: number): number {
    return this.view.from + (x - LABEL_W) / this.scale();
  }

  private resize(): void {
    const ratio = window.devicePixelRatio || 1;
    const width = this.canvas.parentElement!.clientWidth;
    this.canvas.style.height = `${this.height}px`;
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(this.height * ratio);
    this.minimap.width = Math.round(width * ratio);
    this.minimap.height = Math.round(40 * ratio);
    this.minimapImage = null;
    this.draw();
  }

  /** Draws on the next animation frame (many changes, one draw). */
  requestDraw(): void {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
  }

  setView(view: ViewWindow): void {
    const span = Math.max(MIN_SPAN_NS, view.to - view.from);
    const limit = this.model.span * 1.5 + MIN_SPAN_NS;
    const clamped = Math.min(span, limit);
    const mid = (view.from + view.to) / 2;
    this.view = { from: mid - clamped / 2, to: mid + clamped / 2 };
    this.options.onView(this.view);
    this.requestDraw();
  }

  draw(): void {
    this.frame = 0;
    const started = performance.now();
    const ctx = this.canvas.getContext('2d')!;
    const ratio = window.devicePixelRatio || 1;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    const width = this.width;
    ctx.clearRect(0, 0, width, this.height);
    ctx.font = '12px system-ui, sans-serif';
    this.drawAxis(ctx, width);
    const { model } = this;
    const scale = this.scale();
    const { from, to } = this.view;
    for (let l = 0; l < model.lanes.length; l++) {
      const lane = model.lanes[l]!;
      const top = this.laneTop[l]!;
      if (lane.group) {
        ctx.fillStyle = '#374151';
        ctx.fillText(lane.group, 6, top - 5);
        ctx.fillStyle = '#e5e7eb';
        ctx.fillRect(0, top - 1, width, 1);
      }
      ctx.fillStyle = l % 2 ? '#f9fafb' : '#ffffff';
      ctx.fillRect(LABEL_W, top, width - LABEL_W, LANE_H);
      ctx.fillStyle = '#111827';
      ctx.fillText(lane.label, 18, top + 15);
      ctx.save();
      ctx.beginPath();
      ctx.rect(LABEL_W, top, width - LABEL_W, LANE_H);
      ctx.clip();
      // Bars are merged into runs of whole pixels of one colour and drawn once a run ends: at the
      // whole span of 100,000 events most bars are thinner than a pixel and this is one fillRect per
      // run instead of one per event. A slow (red) run is not painted over by the bars after it.
      let runX0 = 0;
      let runX1 = -Infinity;
      let runStyle = '';
      let runAlpha = 1;
      const flush = () => {
        if (runX1 <= runX0) return;
        ctx.fillStyle = runStyle;
        ctx.globalAlpha = runAlpha;
        ctx.fillRect(runX0, top + 3, runX1 - runX0, LANE_H - 6);
      };
      for (let k = firstVisible(lane, from); k < lane.start.length && lane.start[k]! < to; k++) {
        if (lane.end[k]! < from) continue;
        const x0 = Math.floor(LABEL_W + (lane.start[k]! - from) * scale);
        const x1 = Math.max(x0 + 1, Math.ceil(LABEL_W + (lane.end[k]! - from) * scale));
        const i = lane.index[k]!;
        const e = model.events[i]!;
        const style = failed(e)
          ? COLORS.failed
          : lane.end[k]! - lane.start[k]! >= this.slowNs
            ? COLORS.slow
            : COLORS[e.event_type];
        const alpha = this.emitted && !this.emitted[i] ? 0.25 : 1;
        if (style === runStyle && alpha === runAlpha && x0 <= runX1) {
          if (x1 > runX1) runX1 = x1;
          continue;
        }
        const start = runStyle === COLORS.slow ? Math.max(x0, runX1) : x0;
        if (x1 <= start) continue;
        flush();
        runX0 = start;
        runX1 = x1;
        runStyle = style;
        runAlpha = alpha;
      }
      flush();
      ctx.globalAlpha = 1;
      ctx.restore();
    }
    if (this.pinned !== null) this.outline(ctx, this.pinned);
    const playhead = this.shownPlayhead();
    if (playhead !== null) {
      const x = this.xOf(playhead);
      ctx.fillStyle = '#dc2626';
      ctx.fillRect(x - 1, 0, 2, this.height);
      ctx.beginPath();
      ctx.moveTo(x - 6, 0);
      ctx.lineTo(x + 6, 0);
      ctx.lineTo(x, 9);
      ctx.fill();
    }
    this.drawMinimap();
    this.lastDrawMs = performance.now() - started;
    this.canvas.dataset.drawMs = this.lastDrawMs.toFixed(2);
  }

  private clampTime(t: number): number {
    return Math.max(0, Math.min(this.model.span, t));
  }

  private shownPlayhead(): number | null {
    return this.drag?.seekTo ?? this.playhead;
  }

  private outline(ctx: CanvasRenderingContext2D, i: number): void {
    const lane = this.model.laneOf[i]!;
    const top = this.laneTop[lane]!;
    const x0 = this.xOf(this.model.starts[i]!);
    const x1 = Math.max(x0 + 1, this.xOf(this.model.ends[i]!));
    ctx.strokeStyle = COLORS.pinned;
    ctx.lineWidth = 2;
    ctx.strokeRect(x0 - 1, top + 1, x1 - x0 + 2, LANE_H - 2);
  }

  private drawAxis(ctx: CanvasRenderingContext2D, width: number): void {
    ctx.fillStyle = '#f3f4f6';
    ctx.fillRect(0, 0, width, AXIS_H);
    const span = this.view.to - this.view.from;
    const target = span / Math.max(1, (width - LABEL_W) / 110);
    const step = 10 ** Math.floor(Math.log10(target));
    const tick = [1, 2, 5, 10].map((m) => m * step).find((s) => s >= target) ?? step * 10;
    ctx.fillStyle = '#4b5563';
    for (let t = Math.ceil(this.view.from / tick) * tick; t < this.view.to; t += tick) {
      const x = this.xOf(t);
      ctx.fillRect(x, AXIS_H - 6, 1, 6);
      ctx.fillText(`+${formatTick(t, tick, this.view.to)}`, x + 3, 14);
    }
    ctx.fillText(`span ${formatDuration(span)}`, 6, 14);
  }

  private drawMinimap(): void {
    const ctx = this.minimap.getContext('2d')!;
    const ratio = window.devicePixelRatio || 1;
    const width = this.minimap.width / ratio;
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    if (!this.minimapImage) this.minimapImage = this.renderMinimap(width);
    ctx.clearRect(0, 0, width, 40);
    ctx.drawImage(this.minimapImage, 0, 0, width, 40);
    const whole = this.model.span * 1.04;
    const x0 = ((this.view.from + this.model.span * 0.02) / whole) * width;
    const x1 = ((this.view.to + this.model.span * 0.02) / whole) * width;
    ctx.fillStyle = 'rgba(59,130,246,0.15)';
    ctx.fillRect(x0, 0, Math.max(2, x1 - x0), 40);
    ctx.strokeStyle = '#1d4ed8';
    ctx.strokeRect(x0, 0.5, Math.max(2, x1 - x0), 39);
    const playhead = this.shownPlayhead();
    if (playhead !== null) {
      ctx.fillStyle = '#dc2626';
      ctx.fillRect(((playhead + this.model.span * 0.02) / whole) * width - 1, 0, 2, 40);
    }
  }

  /** Events per pixel column over the whole span, once. */
  private renderMinimap(width: number): HTMLCanvasElement {
    const image = document.createElement('canvas');
    image.width = Math.max(1, Math.round(width));
    image.height = 40;
    const counts = new Float64Array(image.width);
    const whole = this.model.span * 1.04;
    for (const lane of this.model.lanes)
      for (let k = 0; k < lane.start.length; k++) {
        const x = Math.floor(((lane.start[k]! + this.model.span * 0.02) / whole) * image.width);
        counts[Math.min(image.width - 1, Math.max(0, x))]! += 1;
      }
    const max = Math.max(1, ...counts);
    const ctx = image.getContext('2d')!;
    ctx.fillStyle = '#f3f4f6';
    ctx.fillRect(0, 0, image.width, 40);
    ctx.fillStyle = '#6b7280';
    counts.forEach((n, x) => {
      if (n) {
        const h = Math.max(2, (Math.log1p(n) / Math.log1p(max)) * 38);
        ctx.fillRect(x, 40 - h, 1, h);
      }
    });
    return image;
  }

  /** Where event i's bar is drawn, in canvas pixels (its middle, or 1 px in when it is thinner than a pixel). */
  barCenter(i: number): { x: number; y: number } {
    const x0 = this.xOf(this.model.starts[i]!);
    const x1 = this.xOf(this.model.ends[i]!);
    return {
      x: x1 - x0 < 2 ? x0 + 0.5 : (x0 + x1) / 2,
      y: this.laneTop[this.model.laneOf[i]!]! + LANE_H / 2,
    };
  }

  /** The event under (x, y), if any: the bar containing x, else the nearest within 3 px. */
  hit(x: number, y: number): number | null {
    if (x < LABEL_W) return null;
    const l = this.laneTop.findIndex((top) => y >= top && y < top + LANE_H);
    if (l < 0) return null;
    const lane = this.model.lanes[l]!;
    const t = this.tOf(x);
    const slack = 3 / this.scale();
    let best: number | null = null;
    let bestDistance = Infinity;
    for (let k = firstVisible(lane, t - slack); k < lane.start.length && lane.start[k]! <= t + slack; k++) {
      const distance = t < lane.start[k]! ? lane.start[k]! - t : t > lane.end[k]! ? t - lane.end[k]! : 0;
      if (distance <= slack && distance <= bestDistance) {
        best = lane.index[k]!;
        bestDistance = distance;
      }
    }
    return best;
  }

  private listen(): void {
    const pos = (ev: MouseEvent) => {
      const rect = this.canvas.getBoundingClientRect();
      return { x: ev.clientX - rect.left, y: ev.clientY - rect.top };
    };
    this.canvas.addEventListener(
      'wheel',
      (ev) => {
        ev.preventDefault();
        const { x } = pos(ev);
        if (x < LABEL_W) return;
        const t = this.tOf(x);
        const factor = Math.exp(ev.deltaY * 0.002);
        this.setView({ from: t - (t - this.view.from) * factor, to: t + (this.view.to - t) * factor });
      },
      { passive: false },
    );
    this.canvas.addEventListener('mousedown', (ev) => {
      const { x, y } = pos(ev);
      // with a session: the playhead is grabbed where it is, and a press on the time axis seeks there
      let seekTo: number | null = null;
      if (this.playhead !== null && y < AXIS_H && x > LABEL_W) seekTo = this.clampTime(this.tOf(x));
      else if (this.playhead !== null && Math.abs(x - this.xOf(this.playhead)) < 6) seekTo = this.playhead;
      this.drag = { x: ev.clientX, from: this.view.from, to: this.view.to, moved: false, seekTo };
      if (seekTo !== null) this.requestDraw();
    });
    window.addEventListener('mousemove', (ev) => {
      const { x, y } = pos(ev);
      if (this.drag) {
        const dx = ev.clientX - this.drag.x;
        if (Math.abs(dx) > 2) this.drag.moved = true;
        if (this.drag.seekTo !== null) {
          this.drag.seekTo = this.clampTime(this.tOf(x));
          this.requestDraw();
        } else if (this.drag.moved) {
          const shift = dx / this.scale();
          this.setView({ from: this.drag.from - shift, to: this.drag.to - shift });
        }
        return;
      }
      if (ev.target !== this.canvas) return;
      this.showTooltip(this.hit(x, y), ev.clientX, ev.clientY);
    });
    window.addEventListener('mouseup', (ev) => {
      const drag = this.drag;
      this.drag = null;
      if (!drag) return;
      if (drag.seekTo !== null) {
        this.playhead = drag.seekTo;
        this.options.onSeek(Math.round(drag.seekTo));
        return;
      }
      if (!drag.moved && ev.target === this.canvas) {
        const { x, y } = pos(ev);
        this.pinned = this.hit(x, y);
        this.options.onPin(this.pinned === null ? null : this.model.events[this.pinned]!);
        this.requestDraw();
      }
    });
    this.canvas.addEventListener('mouseleave', () => (this.tooltip.hidden = true));
    const minimapTo = (ev: MouseEvent) => {
      const rect = this.minimap.getBoundingClientRect();
      const whole = this.model.span * 1.04;
      const t = ((ev.clientX - rect.left) / rect.width) * whole - this.model.span * 0.02;
      const half = (this.view.to - this.view.from) / 2;
      this.setView({ from: t - half, to: t + half });
    };
    this.minimap.addEventListener('mousedown', (ev) => {
      minimapTo(ev);
      const move = (m: MouseEvent) => minimapTo(m);
      window.addEventListener('mousemove', move);
      window.addEventListener('mouseup', () => window.removeEventListener('mousemove', move), { once: true });
    });
  }

  private showTooltip(i: number | null, clientX: number, clientY: number): void {
    if (i === null) {
      this.tooltip.hidden = true;
      return;
    }
    this.tooltip.innerHTML = fieldsHtml(this.model.events[i]!);
    this.tooltip.hidden = false;
    // beside the pointer, flipped above it where it would run off the bottom of the window
    const height = this.tooltip.offsetHeight;
    const below = clientY + 14 + height <= window.innerHeight;
    this.tooltip.style.left = `${Math.min(clientX + 14, window.innerWidth - 380)}px`;
    this.tooltip.style.top = `${(below ? clientY + 14 : Math.max(0, clientY - 14 - height)) + window.scrollY}px`;
  }
}

/** A tick's offset in one unit for the whole axis, with the digits its step needs (1.091234 s at 2 µs a tick). */
function formatTick(t: number, tick: number, end: number): string {
  const [unit, name] =
    end >= 1e9 ? [1e9, 's'] : end >= 1e6 ? [1e6, 'ms'] : end >= 1e3 ? [1e3, 'µs'] : [1, 'ns'];
  const digits = Math.max(0, Math.ceil(-Math.log10(tick / unit) - 1e-9));
  return `${(t / unit).toFixed(Math.min(9, digits))} ${name}`;
}

/** An event's fields as a definition list (tooltip and pinned panel); `traceUrl`: its trace in a trace viewer. */
export function fieldsHtml(e: ApiEvent, traceUrl: string | null = null): string {
  const rows: [string, string][] = [
    ['event_type', e.event_type],
    ['time', formatTime(BigInt(e.timestamp_ns))],
    ['duration', `${formatDuration(Number(e.duration_ns))} (${e.duration_ns} ns)`],
    ['service', e.service_name],
    ['node', e.node],
    ['thread', `${e.comm} pid ${e.pid} tid ${e.tid}`],
  ];
  if (e.event_type !== 'block_io') {
    rows.push(['syscall', `${e.syscall} fd ${e.fd} → ${e.ret}${failed(e) ? ' (failed)' : ''}`]);
    if (e.target) rows.push(['target', `${e.target} (${e.target_kind})`]);
    if (e.response_ns)
      rows.push(['response', `${formatDuration(Number(e.response_ns))} (${e.response_ns} ns)`]);
  } else
    rows.push(['request', `${e.op} ${e.device} sector ${e.sector}${e.error ? ` error ${e.error}` : ''}`]);
  rows.push(['bytes', String(e.bytes)]);
  rows.push(['transaction', e.transaction_id ?? '–']);
  rows.push(['trace', e.trace_id ?? '–']);
  if (e.parent_span_id) rows.push(['parent span', e.parent_span_id]);
  rows.push(['event_id', e.event_id]);
  const value = (k: string, v: string) =>
    k === 'trace' && traceUrl
      ? `<a href="${escapeHtml(traceUrl)}" target="_blank" rel="noopener" data-trace-link>${escapeHtml(v)}</a>`
      : escapeHtml(v);
  return `<dl>${rows.map(([k, v]) => `<dt>${k}</dt><dd data-field="${k}">${value(k, v)}</dd>`).join('')}</dl>`;
}
