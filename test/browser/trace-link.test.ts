/**
 * The timeline links an event's trace to the trace viewer the daemon was
 * given (--trace-url, {trace_id} replaced): a pinned bar's trace is a link
 * there, and without --trace-url it stays text.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchChromium, type TestBrowser } from '../../bench/chromium';
import { silentLogger } from '../../core/log/logger';
import { createDaemon } from '../../daemon/create-daemon';
import { writeStore } from '../support/event-store';

const WEB_ROOT = join(__dirname, '..', '..', 'dist', 'web');
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const TXN = 'req-link';
const T0 = 1_795_338_478_000_000_000n;

let dir: string;
let browser: TestBrowser;

beforeAll(async () => {
  if (!existsSync(join(WEB_ROOT, 'index.html'))) throw new Error(`${WEB_ROOT} is not built: run make build`);
  dir = mkdtempSync(join(tmpdir(), 'kreplay-trace-link-'));
  writeStore(dir, 'n1', [
    {
      ts: T0,
      dur: 800_000_000,
      type: 'sys_fsync',
      txn: TXN,
      trace: TRACE,
      parentSpan: '00f067aa0ba902b7',
      traceFlags: 1,
    },
  ]);
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Opens the transaction on a daemon started with `traceUrl`, pins its one bar, and returns the pinned trace field. */
async function pinnedTrace(traceUrl: string | undefined) {
  const daemon = await createDaemon({ dataDir: dir, log: silentLogger, traceUrl });
  const page = await browser.context.newPage();
  try {
    await page.goto(`${daemon.url}/#/txn/${TXN}`);
    await page.waitForSelector('canvas.timeline');
    const bar = await page.evaluate(() => window.kreplayTimeline.barCenter(0));
    const box = (await page.locator('canvas.timeline').boundingBox())!;
    await page.mouse.click(box.x + bar.x, box.y + bar.y);
    const field = page.locator('#pinned [data-field=trace]');
    await field.waitFor();
    const link = field.locator('a[data-trace-link]');
    return {
      text: await field.textContent(),
      href: (await link.count()) > 0 ? await link.getAttribute('href') : null,
      parent: await page.locator('#pinned [data-field="parent span"]').textContent(),
    };
  } finally {
    await page.close();
    await daemon.close();
  }
}

describe('the trace viewer link', () => {
  it("links a pinned event's trace to --trace-url with the trace id in it", async () => {
    expect(await pinnedTrace('https://jaeger.example/trace/{trace_id}?uiFind={trace_id}')).toEqual({
      text: TRACE,
      href: `https://jaeger.example/trace/${TRACE}?uiFind=${TRACE}`,
      parent: '00f067aa0ba902b7',
    });
  });

  it('shows the trace as text without --trace-url', async () => {
    expect(await pinnedTrace(undefined)).toEqual({ text: TRACE, href: null, parent: '00f067aa0ba902b7' });
  });
});

// The callback given to page.evaluate runs in Chromium; this is the page global it uses.
declare const window: { kreplayTimeline: { barCenter(i: number): { x: number; y: number } } };
