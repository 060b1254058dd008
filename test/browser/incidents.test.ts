/**
 * The incidents view: an incident file dropped into the data dir is listed
 * and opens its transaction's timeline; an uploaded one joins the list; a
 * bad file is shown as skipped with why.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launchChromium, type TestBrowser } from '../../bench/chromium';
import { IncidentWriter } from '../../core/incident';
import { incidentEvents } from '../support/incident-events';
import { startReplayServer, type ReplayServer } from '../support/replay-http';

const ROOT = join(__dirname, '..', '..');
let dir: string;
let server: ReplayServer;
let browser: TestBrowser;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kreplay-browser-incidents-'));
  mkdirSync(join(dir, 'incidents'));
  copyFileSync(join(ROOT, 'test', 'fixtures', 'incident-v1.kri'), join(dir, 'incidents', 'ticket-4711.kri'));
  writeFileSync(join(dir, 'incidents', 'half.kri'), Buffer.from('not an incident at all'));
  server = await startReplayServer(dir);
  browser = await launchChromium();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

it('lists dropped-in and uploaded incident files, opens one as a timeline, names a skipped file', async () => {
  const page = await browser.context.newPage();
  await page.goto(`${server.url}/#/incidents`);
  const rows = page.locator('table.incidents tbody tr');
  await rows.first().waitFor();
  expect(await rows.count()).toBe(1);
  expect(await rows.first().textContent()).toContain('ticket-4711.kri');
  expect(await page.locator('ul.error').textContent()).toContain('half.kri: not an incident file');

  const upload = join(dir, 'upload.kri');
  const writer = new IncidentWriter({
    transactionId: 'uploaded-txn',
    source: 'node-stores',
    exportedAt: 'x',
  });
  for (const e of incidentEvents(20, 'uploaded-txn'))
    writer.add({ ...e, event_id: `c${e.event_id.slice(1)}` });
  writeFileSync(upload, writer.finish(null));
  await page.setInputFiles('#upload input[type=file]', upload);
  await page.click('#upload button[type=submit]');
  await page.locator('table.incidents tbody tr', { hasText: 'uploaded-txn' }).waitFor();
  expect(await rows.count()).toBe(2);

  await page.click('a[href="#/txn/fixture-txn"]');
  await page.waitForURL(/#\/txn\/fixture-txn/);
  await page.waitForSelector('canvas.timeline');
  expect(await page.locator('#txn-summary').textContent()).toContain('40 events');
});
