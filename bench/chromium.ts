/** Debian's Chromium driven by playwright-core, for the browser tests and the timeline benchmark: headless, no sandbox (root), a fresh profile per run, no network beyond the page. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchChromium(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'kreplay-chromium-'));
  // launchPersistentContext is how playwright takes --user-data-dir
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
    viewport: { width: 1400, height: 900 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
