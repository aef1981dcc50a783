// The browser half of `cargo xtask bench ui` (xtask/tasks/src/bench_ui.rs): headless Chromium
// (npm playwright-core, Debian's chromium) measures, with the page's own clock
// (performance.now() from navigation start), when the sessions page and the long lists are on
// screen, and how long each keystroke in a list's filter takes until the next frame. The API key
// is put in the tab's session storage before the page loads, as if typed earlier in the tab.
//
// env: PW_DIR, CHROMIUM, URL (the gateway root), API_KEY, TAG (the seeded tag), SESSION_PREFIX
// (the first characters of a seeded session's id). Prints one JSON line.
import { openPage } from '../../e2e/tests/ui/page.mjs';

const base = process.env.URL;
const { browser, context, page } = await openPage();
await context.addInitScript((key) => {
  sessionStorage.setItem('nsight-api-key', key);
  // When each watched element is first in the document, and the frame after it.
  window.__drawn = {};
  const watched = ['sessions', 'sessions-empty', 'jobs', 'jobs-empty'];
  new MutationObserver(() => {
    for (const id of watched) {
      if (!(id in window.__drawn) && document.querySelector(`[data-testid="${id}"]`)) {
        window.__drawn[id] = null;
        requestAnimationFrame(() => setTimeout(() => { window.__drawn[id] = performance.now(); }));
      }
    }
  }).observe(document, { subtree: true, childList: true });
}, process.env.API_KEY);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// Opens `url` and waits for `id` to be drawn: when (ms), the first contentful paint, and the
// answer of the request whose URL contains `api` (duration, size).
async function load(url, id, api) {
  await page.goto(url);
  await page.waitForFunction((id) => typeof window.__drawn[id] === 'number', id, { timeout: 60_000, polling: 50 });
  return page.evaluate(([id, api]) => {
    const fcp = performance.getEntriesByType('paint').find((e) => e.name === 'first-contentful-paint');
    const answer = performance.getEntriesByType('resource').filter((e) => e.name.includes(api)).pop();
    return {
      drawn: window.__drawn[id],
      fcp: fcp ? fcp.startTime : null,
      api: answer ? answer.responseEnd - answer.startTime : null,
      apiKb: answer ? Math.round(answer.transferSize / 1000) : null,
    };
  }, [id, api]);
}

// Types `text` into the filter box `input` one key at a time; for each key, the time from the
// input event to the frame after the list's last change (rows re-drawn or the count line; the
// jobs list waits for the service's answer). The change is over once nothing moved for 300 ms.
async function keystrokes(input, text) {
  const times = [];
  for (const ch of text) {
    times.push(await page.evaluate(async ([input, ch]) => {
      const box = document.querySelector(`[data-testid="${input}"]`);
      const section = box.closest('section') || document.body;
      let changed = 0;
      let painted = null;
      const seen = new MutationObserver(() => {
        const n = ++changed;
        requestAnimationFrame(() => setTimeout(() => { if (n === changed) painted = performance.now(); }));
      });
      seen.observe(section, { subtree: true, childList: true, characterData: true });
      const t0 = performance.now();
      box.value += ch;
      box.dispatchEvent(new Event('input', { bubbles: true }));
      let before = -1;
      while (changed !== before && performance.now() - t0 < 10000) {
        before = changed;
        await new Promise((r) => setTimeout(r, 300));
      }
      seen.disconnect();
      return painted === null ? null : painted - t0;
    }, [input, ch]));
  }
  return times;
}

const found = {};
try {
  const loads = [];
  for (let i = 0; i < 5; i++) loads.push(await load(base, 'sessions', '/sessions?'));
  found.first = {
    loads: loads.length,
    cold: loads[0].drawn,
    drawn: median(loads.map((l) => l.drawn)),
    fcp: median(loads.map((l) => l.fcp)),
    api: median(loads.map((l) => l.api)),
  };
  found.sessions = await load(`${base}?tag=${process.env.TAG}`, 'sessions', '/sessions?');
  // "run 12" narrows 1,000 titles step by step (run -> run 1 -> run 12).
  found.sessions.keystrokes = await keystrokes('session-filter', 'run 12');
  found.jobs = await load(`${base}?tab=analysis&tag=${process.env.TAG}`, 'jobs', '/jobs');
  found.jobs.keystrokes = await keystrokes('job-filter', process.env.SESSION_PREFIX);
} catch (e) {
  console.error(`UI benchmark failed: ${e.message}\nURL: ${page.url()}\n${(await page.content()).slice(0, 5000)}`);
  await browser.close();
  process.exit(1);
}
await browser.close();
console.log(JSON.stringify(found));
