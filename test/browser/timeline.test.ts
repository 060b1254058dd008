/**
 * The incident page end to end: the real agent records a transaction (file
 * writes and O_DIRECT writes to a loop device, so block requests too), the
 * daemon serves the built page, Chromium searches for it, opens its
 * timeline, reads a bar's fields by hovering it, and drives a replay session
 * in two tabs at once. A screenshot of the timeline is kept in test-artifacts/.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { KREPLAY_BIN, startAgent, type AgentProcess } from '../support/agent-process';
import { launchChromium, type TestBrowser } from '../../bench/chromium';
import { createCgroup, runInCgroup, type TestCgroup } from '../support/cgroup';
import { createLoopDevice, type LoopDevice } from '../support/loop-device';
import { startReplayServer, type ReplayServer } from '../support/replay-http';
import { createDaemon } from '../../daemon/create-daemon';
import { silentLogger } from '../../core/log/logger';
import { readStoredEvents } from '../support/store-rows';
import { writeStore } from '../support/event-store';
import { waitFor } from '../support/wait';

const ROOT = join(__dirname, '..', '..');
const WEB_ROOT = join(ROOT, 'dist', 'web');
const ARTIFACTS = join(ROOT, 'test-artifacts');
const TXN = `browser-${process.pid}`;

let dir: string;
let data: string;
let cgroup: TestCgroup;
let loop: LoopDevice;
let agent: AgentProcess;
let server: ReplayServer;
let browser: TestBrowser;
let recorded: number;
let agentExit: number | null;

beforeAll(async () => {
  if (!existsSync(join(WEB_ROOT, 'index.html'))) throw new Error(`${WEB_ROOT} is not built: run make build`);
  dir = mkdtempSync(join(tmpdir(), 'kreplay-browser-'));
  cgroup = createCgroup(`kreplay-browser-${process.pid}.service`);
  loop = createLoopDevice();
  data = join(dir, 'data');
  agent = await startAgent(['--data-dir', data, '--node', 'web', '--cgroup-id', String(cgroup.id)]);
  // a burst of 600 one-byte writes (so the search table needs more than one page), then about 1.2 s
  // of file writes 40 ms apart and O_DIRECT writes that reach the disk
  const file = join(dir, 'app.log');
  const direct = join(loop.mountPoint, 'direct.bin');
  const burst = `dd if=/dev/zero of=${join(dir, 'burst.bin')} bs=1 count=600 status=none`;
  const steps = Array.from(
    { length: 30 },
    (_, i) =>
      `dd if=/dev/zero bs=${1000 + i} count=1 status=none >> ${file}; ` +
      (i % 5 === 0
        ? `dd if=/dev/zero of=${direct} bs=4096 count=4 oflag=direct conv=notrunc status=none; `
        : '') +
      'sleep 0.04',
  ).join('; ');
  await runInCgroup(cgroup, process.execPath, [
    KREPLAY_BIN,
    'run',
    '--txn',
    TXN,
    '--',
    '/bin/sh',
    '-c',
    `${burst}; ${steps}`,
  ]);
  const store = join(data, 'web.db');
  recorded = await waitFor(() => {
    const rows = existsSync(store) ? readStoredEvents(store, `c.transaction_id = '${TXN}'`) : [];
    const writes = rows.filter((e) => e.type === 1 && e.bytes >= 1000 && e.bytes < 1030).length;
    const bytes = rows.filter((e) => e.type === 1 && e.bytes === 1).length;
    const blocks = rows.filter((e) => e.type === 2).length;
    return writes === 30 && bytes >= 600 && blocks >= 6 ? rows.length : undefined;
  }, 30000);
  // stopped now so that nothing the agent still flushes changes the count the page must show
  agentExit = await agent.stop();
  server = await startReplayServer(data);
  // the page must show what the API holds for the transaction
  const all = await fetch(`${server.url}/api/events?transaction_id=${TXN}&limit=10000`);
  recorded = ((await all.json()) as { events: unknown[] }).events.length;
  expect(recorded).toBeGreaterThanOrEqual(630);
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  if (agent) agentExit = await agent.stop();
  loop?.remove();
  cgroup?.remove();
  rmSync(dir, { recursive: true, force: true });
  expect(agentExit).toBe(0);
});

const stateOf = (page: Page) => page.locator('#session-state').getAttribute('data-state');
const emittedOf = async (page: Page) =>
  Number(await page.locator('#emitted-count').getAttribute('data-count'));
const playheadOf = (page: Page) => page.evaluate(() => window.kreplayTimeline.playhead);

describe('the incident page in Chromium', () => {
  let page: Page;

  it('serves the page with cache headers: index revalidated, hashed assets immutable', async () => {
    const index = await fetch(`${server.url}/`);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const html = await index.text();
    const script = /src="(\/assets\/main-[A-Z0-9]+\.js)"/.exec(html)![1]!;
    const asset = await fetch(`${server.url}${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
  });

  it('finds the recorded transaction by search and opens its timeline', async () => {
    page = await browser.context.newPage();
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(`${server.url}/`);
    await page.fill('input[name=transaction_id]', TXN);
    await page.click('#filters button[type=submit]');
    // the table reads the next page with the cursor as it is scrolled, until the count has no "+"
    const count = page.locator('#search-count');
    await count.filter({ hasText: /^\d+\+? events$/ }).waitFor();
    expect(await count.textContent()).toBe('500+ events');
    const firstTime = () => page.locator('.row').first().locator('.c0').textContent();
    const oldest = (await firstTime())!;
    await page.locator('#viewport').hover();
    while ((await count.textContent())!.endsWith('+ events')) await page.mouse.wheel(0, 5000);
    expect(await count.textContent()).toBe(`${recorded} events`);
    // virtualised: only the rows in view exist
    expect(await page.locator('.row').count()).toBeLessThan(100);
    // newest first: the time column sorts by the API's order (RFC 3339 UTC, nine digits: compared as text)
    await page.click('.thead [data-col="0"]');
    await page.waitForURL(/order=desc/);
    await count.filter({ hasText: '500+ events' }).waitFor();
    expect((await firstTime())! > oldest).toBe(true);
    await page.goBack();
    await count.filter({ hasText: '500+ events' }).waitFor();
    expect(await firstTime()).toBe(oldest);
    expect(await page.locator('.row').count()).toBeGreaterThan(10);
    await page.locator('.row').first().click();
    await page.waitForURL(new RegExp(`#/txn/${TXN}`));
    await page.waitForSelector('canvas.timeline');
    // only the daemon was asked for anything
    expect(requests.every((u) => u.startsWith(server.url))).toBe(true);
    expect(await page.locator('#txn-summary').textContent()).toContain(`${recorded} events`);
  });

  it("hover shows a bar's fields and a click pins them; the slow threshold, a deep link, the minimap", async () => {
    // the last block request of the transaction, zoomed in on: no other request of its device starts
    // after it, so it is the bar drawn on top; its lane, the device's, is the last one, below the many
    // short-lived processes' lanes and so outside the window until the page scrolls to it
    const target = await page.evaluate(() => {
      const view = window.kreplayTimeline;
      const { events } = view.model;
      const i = events.map((e) => e.event_type).lastIndexOf('block_io');
      const start = Number(BigInt(events[i]!.timestamp_ns) - view.model.t0);
      const dur = Number(events[i]!.duration_ns);
      view.setView({ from: start - dur, to: start + 2 * dur });
      const bar = view.barCenter(i);
      window.scrollTo(
        0,
        view.canvas.getBoundingClientRect().top + window.scrollY + bar.y - window.innerHeight / 2,
      );
      return { ...bar, id: events[i]!.event_id, bytes: events[i]!.bytes };
    });
    const box = (await page.locator('canvas.timeline').boundingBox())!;
    expect(box.y + target.y).toBeGreaterThan(0);
    expect(box.y + target.y).toBeLessThan(page.viewportSize()!.height);
    await page.mouse.move(box.x + target.x, box.y + target.y);
    const tooltip = page.locator('.tooltip');
    await tooltip.waitFor({ state: 'visible' });
    expect(await tooltip.locator('[data-field=event_id]').textContent()).toBe(target.id);
    expect(await tooltip.locator('[data-field=event_type]').textContent()).toBe('block_io');
    expect(await tooltip.locator('[data-field=bytes]').textContent()).toBe(String(target.bytes));
    expect(await tooltip.locator('[data-field=transaction]').textContent()).toBe(TXN);
    await page.mouse.click(box.x + target.x, box.y + target.y);
    await page.locator('#pinned [data-field=event_id]').waitFor();
    expect(await page.locator('#pinned [data-field=event_id]').textContent()).toBe(target.id);
    // slow events (here: all, a threshold of 0 ms) are painted red instead of their type's colour
    const pixel = () =>
      page.evaluate(({ x, y }) => {
        const canvas = window.kreplayTimeline.canvas;
        const scale = canvas.width / canvas.clientWidth;
        const d = canvas
          .getContext('2d')!
          .getImageData(Math.round(x * scale), Math.round(y * scale), 1, 1).data;
        return `${d[0]},${d[1]},${d[2]}`;
      }, target);
    expect(await pixel()).toBe('245,158,11');
    await page.fill('#slow-ms', '0');
    await page.waitForFunction((t) => {
      const canvas = window.kreplayTimeline.canvas;
      const scale = canvas.width / canvas.clientWidth;
      const d = canvas
        .getContext('2d')!
        .getImageData(Math.round(t.x * scale), Math.round(t.y * scale), 1, 1).data;
      return d[0] === 220 && d[1] === 38 && d[2] === 38;
    }, target);
    await page.waitForURL(/slow_ms=0/);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.locator('main').screenshot({ path: join(ARTIFACTS, 'timeline.png') });
    expect(statSync(join(ARTIFACTS, 'timeline.png')).size).toBeGreaterThan(10_000);
    // the zoomed view is a link: pasted into another tab it opens the same window of time
    await page.waitForURL(/from=\d+&to=\d+/);
    const shown = await page.evaluate(() => window.kreplayTimeline.view);
    const pasted = await browser.context.newPage();
    await pasted.goto(page.url());
    await pasted.waitForSelector('canvas.timeline');
    const opened = await pasted.evaluate(() => window.kreplayTimeline.view);
    expect(Math.abs(opened.from - shown.from)).toBeLessThanOrEqual(1);
    expect(Math.abs(opened.to - shown.to)).toBeLessThanOrEqual(1);
    await pasted.close();
    // the minimap shows the whole span: a click there centres the view on that time, at the same zoom
    await page.evaluate(() => window.scrollTo(0, 0));
    const mini = (await page.locator('canvas.minimap').boundingBox())!;
    await page.mouse.click(mini.x + mini.width * 0.25, mini.y + mini.height / 2);
    const moved = await page.evaluate(() => ({
      ...window.kreplayTimeline.view,
      span: window.kreplayTimeline.model.span,
    }));
    // the minimap spans the transaction plus 2% either side
    const expected = 0.25 * moved.span * 1.04 - 0.02 * moved.span;
    expect(Math.abs((moved.from + moved.to) / 2 - expected)).toBeLessThan(moved.span * 0.005);
    expect(moved.to - moved.from).toBeCloseTo(shown.to - shown.from, 0);
  });

  it('plays a session in two tabs in step: playhead moves, events appear, pause holds, seek jumps, stop ends', async () => {
    // a tab of its own, opened by deep link
    const page = await browser.context.newPage();
    await page.goto(`${server.url}/#/txn/${TXN}`);
    await page.waitForSelector('canvas.timeline');
    await page.fill('#speed', '0.5');
    await page.click('#create');
    await page.waitForFunction(
      () => document.querySelector('#session-state')?.getAttribute('data-state') === 'ready',
    );
    await page.waitForURL(/session=/);
    const second = await browser.context.newPage();
    await second.goto(page.url());
    await second.waitForFunction(
      () => document.querySelector('#session-state')?.getAttribute('data-state') === 'ready',
    );

    // Chromium runs animation frames only in the tab in front, and the second tab came in front of it
    await page.bringToFront();
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.click('#play');
    await page.waitForFunction(
      () => Number(document.querySelector('#emitted-count')?.getAttribute('data-count')) >= 5,
    );
    // each emitted event is listed with how late the clock released it
    expect(await page.locator('#replay-log .log-row').first().textContent()).toMatch(
      / · late \d+(\.\d+)? (ns|µs|ms)$/,
    );
    const early = (await playheadOf(page))!;
    await page.waitForTimeout(300);
    const later = (await playheadOf(page))!;
    expect(later).toBeGreaterThan(early);
    expect(await stateOf(second)).toBe('playing');
    expect(await emittedOf(second)).toBeGreaterThan(0);

    await page.click('#pause');
    await page.waitForFunction(
      () => document.querySelector('#session-state')?.getAttribute('data-state') === 'paused',
    );
    await second.waitForFunction(
      () => document.querySelector('#session-state')?.getAttribute('data-state') === 'paused',
    );
    const held = [await playheadOf(page), await emittedOf(page), await emittedOf(second)];
    await page.waitForTimeout(500);
    expect([await playheadOf(page), await emittedOf(page), await emittedOf(second)]).toEqual(held);
    const pausedAt = Number(await page.locator('#session-state').getAttribute('data-position'));

    // drag the playhead to 80% of the span
    const box = (await page.locator('canvas.timeline').boundingBox())!;
    const drag = await page.evaluate(() => {
      const view = window.kreplayTimeline;
      const to = view.model.span * 0.8;
      return { from: view.xOf(view.playhead!), to: view.xOf(to), target: to };
    });
    await page.mouse.move(box.x + drag.from, box.y + 12);
    await page.mouse.down();
    await page.mouse.move(box.x + (drag.from + drag.to) / 2, box.y + 12);
    await page.mouse.move(box.x + drag.to, box.y + 12);
    await page.mouse.up();
    await page.waitForFunction(
      (p) => Number(document.querySelector('#session-state')?.getAttribute('data-position')) > p,
      pausedAt,
    );
    const seekedTo = Number(await page.locator('#session-state').getAttribute('data-position'));
    expect(Math.abs(seekedTo - drag.target)).toBeLessThan(drag.target * 0.05);
    await second.waitForFunction(
      (p) => Number(document.querySelector('#session-state')?.getAttribute('data-position')) === p,
      seekedTo,
    );
    expect(await stateOf(page)).toBe('paused');

    await page.click('#stop');
    await page.waitForFunction(
      () => document.querySelector('#session-state')?.getAttribute('data-state') === 'stopped',
    );
    await second.waitForFunction(
      () => document.querySelector('#session-state')?.getAttribute('data-state') === 'stopped',
    );
    expect(await playheadOf(page)).toBeNull();
    await second.close();
    await page.close();
  });

  it('shows the writes of the build a session drives in lanes of their own, as they come', async () => {
    const created = await fetch(`${server.url}/api/replay/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        transaction_id: TXN,
        driving: { command: 'fixed-build --serve', pid: process.pid },
      }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const page = await browser.context.newPage();
    try {
      await page.goto(`${server.url}/#/txn/${TXN}?session=${id}`);
      const driving = `driving fixed-build --serve (pid ${process.pid})`;
      await page.locator('#driving').filter({ hasText: driving }).waitFor();
      // the build's writes as an agent records them under its mark, arriving while the page watches
      const now = BigInt(Date.now()) * 1_000_000n;
      writeStore(
        data,
        'build',
        [0n, 1n, 2n].map((k) => ({
          ts: now + k * 5_000_000n,
          txn: `${TXN}-replay-${id}`,
          service: 'fixed-build',
          comm: 'fixed-build',
          pid: 4242,
        })),
      );
      await page.waitForFunction((n) => window.kreplayTimeline.model.events.length === n, recorded + 3);
      const groups = await page.evaluate(() => window.kreplayTimeline.model.lanes.map((l) => l.group));
      expect(
        groups.filter((g) => g?.startsWith('build fixed-build --serve › build › fixed-build')),
      ).toHaveLength(1);
      // the incident's lanes come first, unchanged
      expect(groups.slice(0, -1).every((g) => !g?.startsWith('build'))).toBe(true);
    } finally {
      await page.close();
      await fetch(`${server.url}/api/replay/sessions/${id}/stop`, { method: 'POST' });
    }
  });

  it('with --tokens: the page loads without one, the API answers once a token is given, the session stream too', async () => {
    const token = `control-${'x'.repeat(24)}`;
    const tokens = join(dir, 'tokens');
    writeFileSync(tokens, `${token} control sre\n`);
    const daemon = await createDaemon({ dataDir: data, log: silentLogger, tokensFile: tokens });
    const page = await browser.context.newPage();
    try {
      await page.goto(`${daemon.url}/#/txn/${TXN}`);
      await page
        .locator('#txn-error')
        .filter({ hasText: /^401: .*enter a token/ })
        .waitFor();
      await page.fill('#token-form input', token);
      await page.click('#token-form button');
      await page.waitForSelector('canvas.timeline');
      expect(await page.locator('#txn-summary').textContent()).toContain(`${recorded} events`);
      await page.click('#create');
      // the state frame comes over the session's stream, read with the token
      await page.locator('#session-state[data-state=ready]').waitFor();
      await page.click('#stop');
      await page.locator('#session-state[data-state=stopped]').waitFor();
    } finally {
      await page.close();
      await daemon.close();
    }
  });
});

/** What the page exposes for tests (window.kreplayTimeline, a TimelineView). */
interface TimelineLike {
  model: {
    span: number;
    lanes: { group: string | null }[];
    t0: bigint;
    events: {
      event_type: string;
      event_id: string;
      bytes: number;
      timestamp_ns: string;
      duration_ns: string;
    }[];
  };
  setView(view: { from: number; to: number }): void;
  playhead: number | null;
  view: { from: number; to: number };
  canvas: {
    width: number;
    clientWidth: number;
    getBoundingClientRect(): { top: number };
    getContext(
      kind: '2d',
    ): { getImageData(x: number, y: number, w: number, h: number): { data: ArrayLike<number> } } | null;
  };
  barCenter(i: number): { x: number; y: number };
  xOf(t: number): number;
}

// The callbacks given to page.evaluate and waitForFunction run in Chromium; these are the page globals they
// use, declared here because lib "dom" would retype fetch, Response and Buffer for the whole node program.
interface PageElement {
  textContent: string | null;
  getAttribute(name: string): string | null;
}
declare const document: { querySelector(selector: string): PageElement | null };
declare const window: {
  kreplayTimeline: TimelineLike;
  innerHeight: number;
  scrollY: number;
  scrollTo(x: number, y: number): void;
};
