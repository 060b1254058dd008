/**
 * Timeline render benchmark: the incident page in Debian's Chromium (the
 * browser tests' launcher), served by the real daemon over loopback from a
 * node store. Per run, the page opens a 100,000-event transaction
 * (64 thread lanes over 8 services, block requests on 2 devices, ~10 s)
 * and, as the anchor, a 1-event transaction (the page's fixed cost: load,
 * fetch, lay out, draw; the median of three opens); the figure is the ratio of the two, both timed in
 * the browser from navigation start to the first draw. Then the big
 * timeline is panned frame by frame, at the whole span and zoomed to 1% of
 * it: each frame's draw time and the interval between frames. Beside, the
 * same events read by a plain HTTP client, for what the events API costs.
 *
 *   node dist/bench/timeline.js [runs]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { EventBatch } from '../agent/ingest/event-batch';
import { StoreWriter } from '../agent/store/store-writer';
import { silentLogger } from '../core/log/logger';
import { createDaemon } from '../daemon/create-daemon';
import { launchChromium } from './chromium';
import { printTable } from './table';

const EVENTS = 100_000;
const SERVICES = 8;
const THREADS_PER_SERVICE = 8;
const BLOCK_SHARE = 0.1;
const DEVICES = [8 * 0x100000, 8 * 0x100000 + 16];
const T0 = 1_795_400_000_000_000_000n;
const MEAN_GAP_NS = 100_000;
const PAN_FRAMES = 120;
const BIG = 'bench-timeline';
const ONE = 'bench-one';

const log = (msg: string) => process.stderr.write(`[bench:timeline] ${msg}\n`);

/** Low-discrepancy fractions (golden ratio): reproducible spread without a seed. */
const spread = (i: number, k = 0.6180339887498949) => (i * k) % 1;

function writeData(dir: string): void {
  const writer = StoreWriter.open(dir, 'bench');
  const batch = new EventBatch(EVENTS + 1);
  batch.clear(T0);
  const ctx = writer.contexts.id(BIG, `${BIG}-trace`);
  const comm = writer.comms.id('worker');
  let offset = 0;
  for (let i = 0; i < EVENTS; i++) {
    offset += Math.round(MEAN_GAP_NS * 2 * spread(i, 0.7548776662466927));
    // log-uniform durations, 2 µs to 2 ms
    const dur = Math.round(2_000 * 1000 ** spread(i));
    const thread = i % (SERVICES * THREADS_PER_SERVICE);
    const service = writer.services.id(`service-${thread % SERVICES}`);
    const common = { tsOffset: offset, dur, service, ctx, pid: 1000 + thread, tid: 1000 + thread, comm };
    if (spread(i, 0.5698402909980532) < BLOCK_SHARE)
      batch.pushBlockIo({ ...common, bytes: 4096, dev: DEVICES[i % 2]!, sector: i * 8, op: 1, error: 0 });
    else batch.pushSysWrite({ ...common, bytes: 512, fd: 3, ret: 512, syscall: 1 });
  }
  batch.pushSysWrite({
    tsOffset: offset + 1_000_000,
    dur: 20_000,
    service: writer.services.id('one'),
    ctx: writer.contexts.id(ONE, null),
    pid: 99,
    tid: 99,
    comm,
    bytes: 512,
    fd: 3,
    ret: 512,
    syscall: 1,
  });
  writer.writeBatch(batch);
  writer.close();
}

// The callbacks given to page.evaluate run in Chromium; these are the page globals they use.
interface PageTimeline {
  model: { span: number };
  view: { from: number; to: number };
  lastDrawMs: number;
  setView(view: { from: number; to: number }): void;
}
declare const window: { kreplayTimeline: PageTimeline };
declare function requestAnimationFrame(callback: (time: number) => void): number;

interface Opened {
  /** navigation start to the first draw of the timeline */
  drawnMs: number;
  /** navigation start to every event fetched */
  loadedMs: number;
  firstDrawMs: number;
}

async function open(page: Page, url: string): Promise<Opened> {
  await page.goto(url);
  await page.waitForFunction(() => performance.getEntriesByName('kreplay:timeline-drawn').length > 0, null, {
    timeout: 120_000,
  });
  return page.evaluate(() => ({
    drawnMs: performance.getEntriesByName('kreplay:timeline-drawn')[0]!.startTime,
    loadedMs: performance.getEntriesByName('kreplay:events-loaded')[0]!.startTime,
    firstDrawMs: window.kreplayTimeline.lastDrawMs,
  }));
}

interface Pan {
  drawP50: number;
  drawP99: number;
  frameP50: number;
  frameP99: number;
  /** frames that took longer than a 60 Hz frame (16.7 ms) */
  slowFrames: number;
}

/** Pans `frames` frames across a window `share` of the span wide, one step per animation frame. */
function pan(page: Page, share: number): Promise<Pan> {
  return page.evaluate(
    async ([share, frames]) => {
      const view = window.kreplayTimeline;
      const width = view.model.span * share;
      const step = (view.model.span - width) / frames;
      const draws: number[] = [];
      const intervals: number[] = [];
      let last = 0;
      await new Promise<void>((done) => {
        let i = 0;
        const frame = (time: number) => {
          // the draw this frame ran (requested by the last setView) is the one just timed
          if (i > 0) {
            draws.push(view.lastDrawMs);
            intervals.push(time - last);
          }
          last = time;
          if (i === frames) return done();
          view.setView({ from: i * step, to: i * step + width });
          i++;
          requestAnimationFrame(frame);
        };
        requestAnimationFrame(frame);
      });
      const pct = (xs: number[], p: number) =>
        [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)]!;
      return {
        drawP50: pct(draws, 0.5),
        drawP99: pct(draws, 0.99),
        frameP50: pct(intervals, 0.5),
        frameP99: pct(intervals, 0.99),
        slowFrames: intervals.filter((t) => t > 1000 / 60 + 1).length,
      };
    },
    [share, PAN_FRAMES] as const,
  );
}

/** The same events read by a plain HTTP client (this process): what the events API alone costs. */
async function readAll(url: string): Promise<number> {
  const started = performance.now();
  let cursor: string | null = null;
  do {
    const query = new URLSearchParams({ transaction_id: BIG, limit: '10000', int64: 'string' });
    if (cursor) query.set('cursor', cursor);
    const res = await fetch(`${url}/api/events?${query}`);
    cursor = ((await res.json()) as { next_cursor: string | null }).next_cursor;
  } while (cursor);
  return performance.now() - started;
}

interface RunResult {
  /** reading the big transaction's events from this process, ms */
  apiMs: number;
  one: Opened;
  big: Opened;
  whole: Pan;
  zoomed: Pan;
}

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 3);
  const dir = mkdtempSync(join(tmpdir(), 'kreplay-bench-timeline-'));
  const results: RunResult[] = [];
  try {
    log(`writing ${EVENTS} events`);
    writeData(dir);
    const daemon = await createDaemon({ dataDir: dir, log: silentLogger });
    const browser = await launchChromium();
    try {
      for (let r = 0; r < runs; r++) {
        // the anchor is the median of three opens: a single one swings with the browser's warm-up
        const ones: Opened[] = [];
        for (let k = 0; k < 3; k++) {
          const page = await browser.context.newPage();
          ones.push(await open(page, `${daemon.url}/#/txn/${ONE}`));
          await page.close();
        }
        const one = ones.sort((a, b) => a.drawnMs - b.drawnMs)[1]!;
        const bigPage = await browser.context.newPage();
        const big = await open(bigPage, `${daemon.url}/#/txn/${BIG}`);
        const whole = await pan(bigPage, 1);
        const zoomed = await pan(bigPage, 0.01);
        await bigPage.close();
        const apiMs = await readAll(daemon.url);
        results.push({ apiMs, one, big, whole, zoomed });
        log(`run ${r + 1}: ${big.drawnMs.toFixed(0)} ms vs ${one.drawnMs.toFixed(0)} ms`);
      }
    } finally {
      await browser.close();
      await daemon.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const ms = (x: number) => x.toFixed(1);
  printTable(
    `Opening a ${EVENTS}-event transaction against a 1-event one (ms from navigation start, in Chromium)`,
    results.map((r, i) => [
      i + 1,
      ms(r.one.drawnMs),
      ms(r.big.drawnMs),
      (r.big.drawnMs / r.one.drawnMs).toFixed(1),
      ms(r.big.loadedMs),
      ms(r.apiMs),
      ms(r.big.drawnMs - r.big.loadedMs),
      ms(r.big.firstDrawMs),
    ]),
    ['run', '1 event', `${EVENTS} events`, 'ratio', 'fetched', 'API alone', 'layout + draw', 'first draw'],
  );
  printTable(
    `Panning the ${EVENTS}-event timeline, ${PAN_FRAMES} frames (ms)`,
    results.flatMap((r, i) =>
      (
        [
          ['whole span', r.whole],
          ['1% of span', r.zoomed],
        ] as const
      ).map(([name, p]) => [
        i + 1,
        name,
        ms(p.drawP50),
        ms(p.drawP99),
        ms(p.frameP50),
        ms(p.frameP99),
        p.slowFrames,
      ]),
    ),
    ['run', 'view', 'draw p50', 'draw p99', 'frame p50', 'frame p99', 'frames > 16.7 ms'],
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
