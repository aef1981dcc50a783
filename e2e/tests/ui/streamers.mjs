// "View trace" on the real node, driven like a person in headless Chromium (npm playwright-core,
// Debian's chromium) through the gateway (HTTPS, API key): on the session's page, launch a
// streamer and wait until it is Ready; click its link and read the new tab it opens (without
// the key: the page's streamer grant lets it through; the project's STAND-IN streamer answers
// with the reports it synced); on the Streamers tab, see it with the cap, delete it, and see it
// gone. Every wait has a deadline. Prints one JSON line of findings for
// e2e/tests/cluster_operator.rs to check against the tenant API and the cluster.
//
// env: PW_DIR, CHROMIUM (page.mjs), URL (the gateway root), API_KEY, SESSION.
import { openPage } from './page.mjs';

const base = process.env.URL;
const found = {};
// The gateway's certificate comes from the test's own CA.
const { browser, context, page, errors, byId, text, waitText } = await openPage({ ignoreHTTPSErrors: true });

// The node's Pod network changes as Pods come and go (veth interfaces), and Chromium then
// aborts a navigation in flight with net::ERR_NETWORK_CHANGED: such a navigation is tried again.
async function navigate(p, go) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await go(p);
    } catch (e) {
      if (attempt >= 5 || !String(e.message).includes('ERR_NETWORK_CHANGED')) throw e;
      found.networkChangedRetries = (found.networkChangedRetries ?? 0) + 1;
      await p.waitForTimeout(1000);
    }
  }
}

try {
  await navigate(page, (p) => p.goto(`${base}/?session=${process.env.SESSION}`));
  await byId('api-key-form').waitFor();
  await byId('api-key').fill(process.env.API_KEY);
  await byId('api-key').press('Enter');
  await byId('view-trace').first().waitFor();

  // Launch from the session, wait for Ready (the Pod copies the reports in first).
  await byId('view-trace').first().click();
  await byId('view-trace-open').waitFor({ timeout: 150_000 });
  const href = await byId('view-trace-open').getAttribute('href');
  found.openHref = href;
  found.streamer = href.split('/').filter(Boolean).pop();

  // What the link opens, in the new tab a click on it opens, as a person would: that tab carries
  // no API key (it is not the page's fetch), so the gateway lets it through on the streamer grant
  // the page asked for before it showed the link (docs/auth.md, "Streamer grants"). The
  // stand-in streamer answers with the reports it synced, as JSON.
  const opened = new URL(href, page.url()).href;
  const answered = new Promise((resolve) => {
    context.on('response', (r) => { if (r.url() === opened) resolve(r.status()); });
  });
  const [tab] = await Promise.all([
    context.waitForEvent('page', { timeout: 60_000 }),
    byId('view-trace-open').click(),
  ]);
  await tab.waitForLoadState('load', { timeout: 60_000 });
  let status = await Promise.race([answered, new Promise((r) => setTimeout(() => r(0), 30_000))]);
  let shown = await tab.evaluate(() => document.body.innerText);
  let body;
  try { body = JSON.parse(shown); } catch { body = undefined; }
  // A tab whose load the network change aborted shows Chromium's error page: load it again.
  for (let attempt = 1; body === undefined && attempt <= 4; attempt++) {
    found.networkChangedRetries = (found.networkChangedRetries ?? 0) + 1;
    const response = await navigate(tab, (p) => p.reload({ timeout: 60_000 }));
    status = response?.status() ?? 0;
    shown = await tab.evaluate(() => document.body.innerText);
    try { body = JSON.parse(shown); } catch { body = undefined; }
  }
  if (body === undefined) body = { unparsed: shown.slice(0, 2000) };
  found.standIn = { status, url: tab.url(), body };
  await tab.close();

  // The Streamers tab: the cap, the user's streamer, Ready; delete it.
  await byId('tab-streamers').click();
  await page.locator(`[data-streamer="${found.streamer}"]`).waitFor();
  found.cap = await text('streamers-cap');
  found.phase = await page.$eval(`[data-streamer="${found.streamer}"] [data-testid="streamer-phase"]`, (e) => e.textContent);
  found.tabUrl = page.url();
  await page.locator(`[data-streamer="${found.streamer}"] [data-testid="streamer-delete"]`).click();
  await byId('streamers-empty').waitFor();
  found.capAfter = await text('streamers-cap');
} catch (e) {
  const dom = await page.content().catch(() => '');
  console.error(`streamers flow failed: ${e.message}\npage errors: ${errors.join('\n')}\nURL: ${page.url()}\nDOM:\n${dom.slice(0, 20000)}`);
  await browser.close();
  process.exit(1);
}
found.pageErrors = errors;
await browser.close();
console.log(JSON.stringify(found));
