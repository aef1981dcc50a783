// The Cloud UI driven like a person in headless Chromium (npm playwright-core, Debian's
// chromium): sign in with the API key or through the gateway's OpenID provider, begin a
// session, start and stop a collection, see the report, run nvtx_sum from the generated form
// (after the form refused a bad value), sort its table, see the notebook, reload a deep link,
// cancel and delete a job that would run forever, compare two collections in one click, end
// the session after confirming; "View trace" says why no streamer can be launched here (no
// tenant API in local mode), and so does the Streamers tab; the agent's OTLP mirroring counters
// in the agents table. Every wait has a deadline; any failure throws with what the page showed.
// Prints one JSON line of findings for the Rust tests (e2e/tests/ui_platform.rs, ui_oauth2.rs,
// through support/ui_flow.rs) to check against the REST APIs.
//
// env: PW_DIR (playwright-core's install prefix), URL (the gateway root), SHOTS (dir), and how
// to sign in: AUTH=api-key with API_KEY, or AUTH=oauth2 with ISSUER (the OpenID provider's
// URL) and LOGIN (the name typed on its login page).
import { openPage } from './page.mjs';

const base = process.env.URL;
const shots = process.env.SHOTS;
const oauth2 = process.env.AUTH === 'oauth2';
const found = { steps: [] };
const step = (name) => { found.steps.push([name, Date.now()]); };

// An HTTPS gateway serves the platform's own certificate, which Chromium's store does not hold.
const { browser, page, errors, byId, text, waitText } =
  await openPage(base.startsWith('https:') ? { ignoreHTTPSErrors: true } : {});
const shot = (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });

// The provider's own pages (oidc-provider's development login and consent forms), as a person
// fills them in, until the browser is back on the gateway.
async function signInAtProvider() {
  const provider = new URL(process.env.ISSUER).origin;
  const gateway = new URL(base).origin;
  await page.waitForURL((u) => u.origin === provider);
  found.providerPages = 0;
  while (new URL(page.url()).origin === provider) {
    if (++found.providerPages > 5) throw new Error(`still at the provider: ${page.url()}`);
    await page.locator('form button[type="submit"], form input[type="submit"]').first().waitFor();
    const login = page.locator('input[name="login"]');
    if (await login.count()) {
      await login.fill(process.env.LOGIN);
      await page.locator('input[name="password"]').fill('any password');
    }
    const here = page.url();
    await page.locator('form button[type="submit"], form input[type="submit"]').first().click();
    await page.waitForURL((u) => u.href !== here);
  }
  if (new URL(page.url()).origin !== gateway) throw new Error(`signed in, but at ${page.url()}`);
}

try {
  // Sign in. The API routes answer 401 (API key) or a redirect to the identity provider that
  // the page sees as an opaque redirect (OAuth2): the sign-in box appears either way.
  await page.goto(oauth2 ? `${base}?state=open` : base);
  await byId('api-key-form').waitFor();
  // Milliseconds from navigation start to the first page drawn by the Wasm code (Performance API).
  found.firstRenderMs = await page.evaluate(() => performance.now());
  step('prompted to sign in');
  found.keyTyped = !oauth2;
  if (oauth2) {
    await byId('sign-in').click();
    await signInAtProvider();
    await page.waitForURL((u) => u.searchParams.get('state') === 'open');
    found.signedInAt = page.url();
    step('signed in at the provider');
  } else {
    await byId('api-key').fill(process.env.API_KEY);
    await byId('api-key').press('Enter');
  }
  await waitText('agents-connected', /^1 of 1 agent/, 60_000);
  step('agent connected');

  // Begin a titled session from the keyboard-reachable controls.
  // From the keyboard: type the title, Tab to "Begin session", Enter.
  await byId('session-title').fill('ui e2e');
  await byId('session-title').press('Tab');
  found.focusAfterTitle = await page.evaluate(() => document.activeElement?.dataset.testid);
  await page.keyboard.press('Enter');
  await waitText('action-notice', /^Began session /);
  const session = new URL(page.url()).searchParams.get('session');
  if (!session) throw new Error(`no session in the URL ${page.url()}`);
  found.session = session;
  await waitText('detail-title', /^ui e2e$/);

  await byId('start').click();
  await waitText('action-notice', /^Started collection 1 of session /);
  await waitText('active-collection', /Collection 1 is collecting/);
  step('collecting');
  await page.waitForTimeout(1500);
  await byId('stop').click();
  await waitText('action-notice', /^Stopping collection 1/);
  // Live updates: no click needed until the upload shows.
  await waitText('collection-state', /^completed$/, 60_000);
  await byId('report-row').first().waitFor({ timeout: 60_000 });
  found.agentStates = await page.$$eval('[data-testid="agent-state"]', (es) => es.map((e) => e.textContent));
  found.reportFile = await text('report-file');
  found.reportSize = await text('report-size');
  found.reportHref = await byId('report-download').first().getAttribute('href');
  step('report listed');
  await shot('sessions');

  // "View trace" where no tenant API is deployed (local mode): the page says so, names the
  // Helm value that enables it, and points at the built-in Timeline.
  await byId('view-trace').first().click();
  await waitText('view-trace-status', /No tenant API is deployed behind this gateway/);
  found.viewTrace = await text('view-trace-status');
  found.viewTraceButtons = await byId('view-trace').count();

  // The generated form: a bad value is refused with the field's message, nothing is sent.
  await byId('analyse-collection').first().click();
  await byId('recipe-form').waitFor();
  await byId('recipe-cuda_gpu_kern_hist').click();
  await byId('arg-bins').fill('ten');
  await byId('run-recipe').click();
  await waitText('arg-bins-error', /is not a number/);
  found.binsError = await text('arg-bins-error');
  found.binsInvalid = await byId('arg-bins').getAttribute('aria-invalid');
  await byId('arg-bins').fill('50000');
  await byId('run-recipe').click();
  await waitText('arg-bins-error', /between 1 and 10000/);
  found.binsRange = await text('arg-bins-error');

  // nvtx_sum over collection 1, in microseconds.
  await byId('recipe-nvtx_sum').click();
  found.timeunitTag = await byId('arg-timeunit').evaluate((e) => e.tagName);
  found.timeunitChoices = await byId('arg-timeunit').evaluate((e) => [...e.options].map((o) => o.value));
  await byId('arg-timeunit').selectOption('usec');
  found.jobCollection = await byId('job-collection').inputValue();
  await byId('run-recipe').click();
  await page.waitForURL(/job=/);
  const job = new URL(page.url()).searchParams.get('job');
  found.job = job;
  await waitText('job-status', /^succeeded$/, 90_000);
  found.jobArgs = await text('job-args');
  await byId('grid').waitFor();
  step('job succeeded');
  found.gridHeader = await page.$$eval('[data-testid="grid"] thead th', (es) => es.map((e) => e.textContent.replace(/[▲▼]/g, '').trim()));
  const col = found.gridHeader.findIndex((h) => /Instances/.test(h));
  if (col < 0) throw new Error(`no Instances column in ${found.gridHeader}`);
  await byId('grid').locator('thead th').nth(col).getByRole('button').click();
  found.sortState = await byId('grid').locator('thead th').nth(col).getAttribute('aria-sort');
  found.sortedInstances = await page.$$eval(`[data-testid="grid"] tbody tr td:nth-child(${col + 1})`, (es) => es.map((e) => e.textContent));
  await byId('notebook').waitFor();
  found.notebookSandbox = await byId('notebook').getAttribute('sandbox');
  await shot('job');

  // A deep link reopens the same view (the key stays in the tab's session storage; the OAuth2
  // session cookie stays with the browser).
  const jobUrl = page.url();
  await page.reload();
  await waitText('job-status', /^succeeded$/);
  await byId('grid').waitFor();
  found.reloadedUrl = page.url();
  found.reloadedRecipeForm = await byId('recipe-form').count();
  step('deep link reloaded');

  // A job that would run forever: cancelled from its page, then deleted.
  await byId('recipe-sql').click();
  await byId('arg-query').fill('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c');
  await byId('run-recipe').click();
  await page.waitForURL((u) => u.searchParams.get('job') && u.searchParams.get('job') !== job);
  const runaway = new URL(page.url()).searchParams.get('job');
  found.runaway = runaway;
  await waitText('job-status', /^running$/, 30_000);
  await byId('job-cancel').click();
  await waitText('job-status', /^cancelled$/);
  found.cancelReason = await text('job-reason');
  step('long job cancelled');
  // The status filter, kept in the URL.
  await byId('job-status-filter').selectOption('cancelled');
  await page.waitForURL((u) => u.searchParams.get('status') === 'cancelled');
  await page.waitForFunction((id) => {
    const rows = [...document.querySelectorAll('[data-testid="job-row"]')];
    return rows.length === 1 && rows[0].dataset.job === id;
  }, runaway);
  found.filteredJobs = await page.$$eval('[data-testid="job-row"]', (es) => es.map((e) => e.dataset.job));
  await byId('job-status-filter').selectOption('');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="job-row"]').length === 2);
  await byId('job-delete').click();
  await page.waitForURL((u) => !u.searchParams.get('job'));
  await page.waitForFunction((id) => !document.querySelector(`[data-job="${id}"]`), runaway);
  found.jobsAfterDelete = await page.$$eval('[data-testid="job-row"]', (es) => es.map((e) => e.dataset.job));

  // A second collection, compared with the first in one click (a diff job).
  await byId('tab-sessions').click();
  await byId('session-link').first().click();
  await byId('start').click();
  await waitText('action-notice', /^Started collection 2 of session /);
  await page.waitForTimeout(1500);
  await byId('stop').click();
  await waitText('action-notice', /^Stopping collection 2/);
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="collection-state"]')]
    .filter((e) => e.textContent === 'completed').length === 2, null, { timeout: 60_000, polling: 200 });
  await byId('compare-collection').click();
  await page.waitForURL((u) => u.searchParams.get('tab') === 'analysis' && u.searchParams.get('job'));
  found.diffJob = new URL(page.url()).searchParams.get('job');
  await waitText('job-status', /^(succeeded|failed)$/, 90_000);
  found.diffStatus = await text('job-status');
  // The words filter of the jobs list: only the diff job has "diff" in it.
  await byId('job-filter').fill('diff');
  await page.waitForURL((u) => u.searchParams.get('q') === 'diff');
  await page.waitForFunction((id) => {
    const rows = [...document.querySelectorAll('[data-testid="job-row"]')];
    return rows.length === 1 && rows[0].dataset.job === id;
  }, found.diffJob);
  found.jobsMatchingDiff = await page.$$eval('[data-testid="job-row"]', (es) => es.map((e) => e.dataset.job));
  step('collections compared');

  // End the session: a confirmation first; Cancel keeps it open.
  await byId('tab-sessions').click();
  await byId('session-link').first().click();
  await byId('end').click();
  await byId('end-confirm').waitFor();
  await page.waitForFunction(() => document.activeElement?.dataset.testid === 'end-confirm-no');
  found.confirmFocus = await page.evaluate(() => document.activeElement?.dataset.testid);
  await page.keyboard.press('Escape');
  await byId('end-confirm').waitFor({ state: 'detached' });
  await byId('end').click();
  await byId('end-confirm-no').click();
  found.confirmGone = (await byId('end-confirm').count()) === 0;
  await byId('end').click();
  await byId('end-confirm-yes').click();
  await waitText('action-notice', /^Ended session /);
  await waitText('detail-state', /^ended$/);
  await page.goto(`${base}?session=${session}`);
  await waitText('detail-state', /^ended$/);
  found.sessionRowState = await page.$eval(`[data-session="${session}"] [data-testid="session-state"]`, (e) => e.textContent);
  // The state filter, kept in the URL: no open session is left, the ended one is listed.
  await byId('session-state-filter').selectOption('open');
  await byId('sessions-empty').waitFor();
  found.openFilterUrl = page.url();
  await byId('session-state-filter').selectOption('ended');
  await page.locator(`[data-session="${session}"]`).waitFor();
  // The words filter, in the URL as one types (replaced: Back does not replay every key).
  const historyBefore = await page.evaluate(() => history.length);
  await byId('session-filter').fill('E2E');
  await page.waitForURL((u) => u.searchParams.get('q') === 'E2E');
  await page.locator(`[data-session="${session}"]`).waitFor();
  found.wordsCount = await text('list-count');
  await byId('session-filter').fill('no such words');
  await byId('sessions-empty').waitFor();
  found.wordsNoMatch = await text('sessions-empty');
  found.historyGrew = (await page.evaluate(() => history.length)) - historyBefore;
  await byId('session-filter').fill('');
  await page.locator(`[data-session="${session}"]`).waitFor();
  // Sorting by a column: a second (open, no collection) session; newest first by default, then
  // by Collections (largest first, then the other way), kept in the URL without history.
  await byId('session-state-filter').selectOption('');
  await byId('session-title').fill('sort check');
  await byId('begin').click();
  await waitText('action-notice', /^Began session /);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="session-row"]').length === 2);
  const rowOrder = () => page.$$eval('[data-testid="session-row"]', (es) => es.map((e) => e.dataset.session));
  const sortHistory = await page.evaluate(() => history.length);
  found.sortDefault = await rowOrder();
  await byId('sessions-sort-collections').click();
  await page.waitForURL((u) => u.searchParams.get('sort') === '-collections');
  await page.waitForFunction((id) => document.querySelector('[data-testid="session-row"]')?.dataset.session === id, session);
  found.sortByCollections = await rowOrder();
  found.sortAria = await page.$eval('[data-testid="sessions-sort-collections"]', (b) => b.parentElement.getAttribute('aria-sort'));
  await byId('sessions-sort-collections').click();
  await page.waitForURL((u) => u.searchParams.get('sort') === 'collections');
  await page.waitForFunction((id) => document.querySelector('[data-testid="session-row"]')?.dataset.session !== id, session);
  found.sortByCollectionsAscending = await rowOrder();
  found.sortHistoryGrew = (await page.evaluate(() => history.length)) - sortHistory;
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="session-row"]').length === 2);
  found.sortAfterReload = await rowOrder();
  found.sortCaption = await page.$eval('[data-testid="sessions"] caption', (c) => c.textContent);
  found.jobUrl = jobUrl;
  step('ended');
  await shot('ended');
  // The agent's OTLP mirroring, as its heartbeats (every 5 s) report it: refreshed by hand.
  const deadline = Date.now() + 30_000;
  for (;;) {
    await byId('refresh').click();
    await page.waitForTimeout(1000);
    found.mirroring = await text('agent-mirroring');
    if (/^[1-9]\d* sent, 0 dropped/.test(found.mirroring) || Date.now() > deadline) break;
  }
  step('mirroring shown');
  // The Streamers tab where no tenant API is deployed: said plainly.
  await byId('tab-streamers').click();
  await byId('streamers-unavailable').waitFor();
  found.streamersTab = await text('streamers-unavailable');
} catch (e) {
  await shot('failure').catch(() => {});
  const dom = await page.content().catch(() => '');
  console.error(`UI flow failed: ${e.message}\npage errors: ${errors.join('\n')}\nURL: ${page.url()}\nDOM:\n${dom.slice(0, 20000)}`);
  await browser.close();
  process.exit(1);
}
found.pageErrors = errors;
await browser.close();
console.log(JSON.stringify(found));
