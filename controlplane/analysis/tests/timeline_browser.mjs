// The timeline page driven like a person in headless Chromium (npm playwright-core, Debian's
// chromium): open a report's timeline by its deep link, click a kernel, follow the link to the
// API call that launched it, zoom and pan with the keyboard, drag a selection, reload the page
// and find the same view. Every wait has a deadline; a failure throws with what the page showed.
// Prints one JSON line of findings for timeline_browser.rs to check against SQL.
//
// env: PW_DIR, CHROMIUM, URL (gateway root), API_KEY, SHOTS (dir), PLAN (JSON from the test:
// report, range [a, b], click {x_ns, y}, width).
import { createRequire } from 'node:module';

const require = createRequire(process.env.PW_DIR + '/node_modules/');
const { chromium } = require('playwright-core');

const base = process.env.URL;
const plan = JSON.parse(process.env.PLAN);
const found = { steps: [] };
const step = (name) => { found.steps.push([name, Date.now()]); };
const LABEL_W = 240;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const page = await browser.newPage({ viewport: { width: plan.width, height: 1000 } });
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
page.setDefaultTimeout(30_000);
const byId = (id) => page.getByTestId(id);
const canvas = byId('timeline-canvas');
const attr = async (name) => canvas.getAttribute(`data-${name}`);
const num = async (name) => Number(await attr(name));
// Waits until every tile the frame wants has come and been drawn.
const settled = async () => {
  await page.waitForFunction(() => {
    const c = document.querySelector('[data-testid="timeline-canvas"]');
    return c && c.dataset.pending === '0' && Number(c.dataset.frame) > 0;
  }, null, { timeout: 30_000, polling: 50 });
  // One more frame so that the drawn tiles are the complete ones.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
};
const xOf = async (t) => {
  const [from, to] = [await num('from'), await num('to')];
  const box = await canvas.boundingBox();
  return box.x + LABEL_W + (t - from) / ((to - from) / (box.width - LABEL_W));
};
const shot = (name) => page.screenshot({ path: `${process.env.SHOTS}/${name}.png` });

try {
  // The key prompt first (the gateway wants it), then the deep link.
  await page.goto(base);
  await byId('api-key-form').waitFor();
  await byId('api-key').fill(process.env.API_KEY);
  await byId('api-key').press('Enter');
  await byId('sessions').or(byId('sessions-empty')).first().waitFor().catch(() => {});
  const link = `${base}?tab=timeline&report=${encodeURIComponent(plan.report)}` +
    `&range=${plan.range[0]}_${plan.range[1]}`;
  const opened = Date.now();
  await page.goto(link);
  await canvas.waitFor();
  await settled();
  found.firstTimelineMs = Date.now() - opened;
  found.summary = await byId('timeline-summary').textContent();
  found.range = [await num('from'), await num('to')];
  found.levelAtStart = await num('level');
  found.drawnAtStart = await num('drawn');
  step('opened');
  await shot('timeline');

  // Click the kernel in the middle of the view.
  const box = await canvas.boundingBox();
  const x = await xOf(plan.click.x_ns);
  await page.mouse.click(x, box.y + plan.click.y);
  await byId('detail-name').waitFor();
  found.detailName = await byId('detail-name').textContent();
  found.detailDurationNs = Number(await byId('detail-duration').getAttribute('data-ns'));
  found.detailStart = Number(await byId('detail-start').textContent());
  found.urlAfterClick = page.url();
  step('clicked a kernel');

  // Its launch: the API call, by the correlation id; the link selects it.
  const related = byId('detail-related').first();
  found.relatedName = await related.textContent();
  await related.click();
  await page.waitForFunction((name) => {
    const n = document.querySelector('[data-testid="detail-name"]');
    return n && n.textContent === name;
  }, found.relatedName, { timeout: 30_000 });
  found.afterFollow = await byId('detail-name').textContent();
  found.urlAfterFollow = page.url();
  step('followed the launch');

  // Zoom in three steps (W) and pan right (D): the view and the level change, tiles come.
  await canvas.focus();
  const [f0, t0] = [await num('from'), await num('to')];
  const level0 = await num('level');
  for (let i = 0; i < 3; i++) await page.keyboard.press('w');
  await settled();
  const [f1, t1] = [await num('from'), await num('to')];
  found.zoomRatio = (t1 - f1) / (t0 - f0);
  found.levelAfterZoom = await num('level');
  found.levelBeforeZoom = level0;
  await page.keyboard.press('d');
  await settled();
  found.panShiftNs = (await num('from')) - f1;
  found.panSpanNs = t1 - f1;
  // Back out to the whole report with S, and measure frames while panning (A/D).
  for (let i = 0; i < 40; i++) await page.keyboard.press('s');
  await settled();
  found.zoomedOut = [await num('from'), await num('to')];
  const frameMs = [];
  for (let i = 0; i < 10; i++) {
    await page.keyboard.press(i % 2 ? 'a' : 'd');
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    frameMs.push(await num('frame-ms'));
  }
  found.panFrameMs = frameMs;
  await settled();
  step('zoomed and panned');

  // Drag across the middle third: the selection's aggregates.
  const b2 = await canvas.boundingBox();
  const y = b2.y + 30;
  const xa = b2.x + LABEL_W + (b2.width - LABEL_W) / 3;
  const xb = b2.x + LABEL_W + 2 * (b2.width - LABEL_W) / 3;
  await page.mouse.move(xa, y);
  await page.mouse.down();
  await page.mouse.move(xb, y, { steps: 8 });
  await page.mouse.up();
  await byId('range-table').waitFor();
  await page.waitForFunction(() => new URL(location.href).searchParams.get('sel'), null, { timeout: 10_000 });
  found.sel = new URL(page.url()).searchParams.get('sel');
  found.rangeRows = await page.$$eval('[data-testid="range-row"]', (rows) => rows.map((r) => ({
    name: r.querySelector('[data-testid="range-name"]').textContent,
    count: Number(r.querySelector('[data-testid="range-count"]').textContent),
    totalNs: Number(r.querySelector('[data-testid="range-total"]').dataset.ns),
  })));
  await shot('timeline-selection');
  step('selected a range');

  // The URL holds the view: a reload shows the same range, event and selection.
  await page.waitForFunction(() => new URL(location.href).searchParams.get('range'), null, { timeout: 10_000 });
  const before = [await num('from'), await num('to')];
  found.urlBeforeReload = page.url();
  await page.reload();
  await canvas.waitFor();
  await settled();
  found.reloadRange = [await num('from'), await num('to')];
  found.rangeBeforeReload = before;
  await byId('detail-name').waitFor();
  found.reloadDetail = await byId('detail-name').textContent();
  await byId('range-table').waitFor();
  found.reloadRangeRows = await page.$$eval('[data-testid="range-row"]', (rows) => rows.length);
  step('reloaded');
  // Next / previous match from the selected event (the service searches the whole report).
  const eventParam = () => new URL(location.href).searchParams.get('event');
  found.searchFrom = await page.evaluate(eventParam);
  await byId('timeline-search').fill(plan.search);
  await byId('timeline-search-next').click();
  await page.waitForFunction((from) => new URL(location.href).searchParams.get('event') !== from, found.searchFrom, { timeout: 15_000 });
  found.searchNext = await page.evaluate(eventParam);
  await page.waitForFunction(() => document.querySelector('[data-testid="timeline-search-status"]')?.textContent, null, { timeout: 10_000 });
  found.searchNextStatus = await byId('timeline-search-status').textContent();
  await settled();
  found.searchNextView = [await num('from'), await num('to')];
  await byId('timeline-search').press('Shift+Enter');
  await page.waitForFunction((from) => new URL(location.href).searchParams.get('event') !== from, found.searchNext, { timeout: 15_000 });
  found.searchPrev = await page.evaluate(eventParam);
  await byId('timeline-search').fill('no-such-name-zz');
  await byId('timeline-search').press('Enter');
  await page.waitForFunction(() => /^No later event/.test(document.querySelector('[data-testid="timeline-search-status"]')?.textContent ?? ''), null, { timeout: 15_000 });
  found.searchNone = await byId('timeline-search-status').textContent();
  found.searchNoneEvent = await page.evaluate(eventParam);
  step('searched');
  // The Perfetto export, saved by the browser with the tab's credentials.
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: 60_000 }),
    byId('timeline-perfetto').click(),
  ]);
  found.perfettoName = download.suggestedFilename();
  found.perfettoPath = `${process.env.SHOTS}/${found.perfettoName}`;
  await download.saveAs(found.perfettoPath);
  await page.waitForFunction(
    () => document.querySelector('[data-testid="timeline-perfetto-status"]')?.textContent.startsWith('Saved'),
    null, { timeout: 10_000 });
  found.perfettoStatus = await byId('timeline-perfetto-status').textContent();
  step('perfetto');
  found.pageErrors = errors;
} catch (e) {
  await page.screenshot({ path: `${process.env.SHOTS}/timeline-failure.png` }).catch(() => {});
  const html = await page.content().catch(() => '');
  console.error(`${e.stack}\nerrors: ${JSON.stringify(errors)}\nfound: ${JSON.stringify(found)}\n${html.slice(0, 4000)}`);
  await browser.close();
  process.exit(1);
}
await browser.close();
console.log(JSON.stringify(found));
