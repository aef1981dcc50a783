// Shared by the browser flows (flow.mjs, streamers.mjs): Debian's Chromium through npm
// playwright-core (never a downloaded browser), one page, and the helpers that find elements by
// their data-testid and wait, with a deadline, for a text.
//
// env: PW_DIR (playwright-core's install prefix), CHROMIUM (default /usr/bin/chromium).
import { createRequire } from 'node:module';

export async function openPage(contextOptions = {}) {
  const require = createRequire(process.env.PW_DIR + '/node_modules/');
  const { chromium } = require('playwright-core');
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
           '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...contextOptions });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.setDefaultTimeout(30_000);
  const byId = (id) => page.getByTestId(id);
  const text = async (id) => (await byId(id).first().textContent()) ?? '';
  const waitText = async (id, re, timeout = 30_000) => {
    await page.waitForFunction(
      ([id, src]) => [...document.querySelectorAll(`[data-testid="${id}"]`)]
        .some((e) => new RegExp(src).test(e.textContent)),
      [id, re.source], { timeout, polling: 200 });
  };
  return { browser, context, page, errors, byId, text, waitText };
}
