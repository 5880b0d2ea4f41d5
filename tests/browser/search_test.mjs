// Headless Chromium test of the search page of `vitreg serve --index`.
//
//   node tests/browser/search_test.mjs PAGE_URL UPLOAD_FILE EXPECTED_JSON [SCREENSHOT_PNG]
//
// EXPECTED_JSON: {"upload_key": KEY, "results": N, "no_thumbnail": M}. Uploads the file and expects N results,
// the first KEY with score 1, every thumbnail drawn but M (drawn as "no thumbnail"); then clicks the next
// result with a thumbnail and expects a search from it (its own id first). A page error, or a console error other than the M
// thumbnails the server refuses (422), fails the run. Needs Node 18+ and playwright-core; CHROMIUM overrides
// /usr/bin/chromium.
import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const [url, uploadFile, expectedFile, screenshot] = process.argv.slice(2);
if (!expectedFile) {
  console.error('usage: node search_test.mjs PAGE_URL UPLOAD_FILE EXPECTED_JSON [SCREENSHOT_PNG]');
  process.exit(2);
}
const expected = JSON.parse(readFileSync(expectedFile, 'utf8'));
const STEP_MS = Number(process.env.EXPLORE_TEST_TIMEOUT_MS) || 60000;
const failures = [];
const ok = (cond, msg) => { console.log(`${cond ? 'ok  ' : 'FAIL'} ${msg}`); if (!cond) failures.push(msg); return cond; };

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
const problems = [];
let refusedLoads = 0;
try {
  const page = await (await browser.newContext({ viewport: { width: 1200, height: 800 } })).newPage();
  page.setDefaultTimeout(STEP_MS);
  page.on('console', (m) => {
    if (m.type() !== 'error' && m.type() !== 'warning') return;
    if (/Failed to load resource.*422/.test(m.text())) refusedLoads++;
    else problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(url);
  await page.waitForFunction(() => window.vitregSearch && window.vitregSearch.ready);
  const results = () => page.evaluate(() => window.vitregSearch.results());
  const idle = () => page.evaluate(() => window.vitregSearch.idle());
  const thumbnailsSettled = () => page.waitForFunction(
    (n) => document.querySelectorAll('figure.hit img').length + document.querySelectorAll('figure.hit .none').length === n &&
      Array.from(document.querySelectorAll('figure.hit img')).every((i) => i.complete && i.naturalWidth > 0),
    expected.results);

  await page.setInputFiles('#upload', uploadFile);
  await idle();
  let got = await results();
  ok(got.length === expected.results, `upload: ${got.length} results (want ${expected.results})`);
  ok(got.length > 0 && got[0].key === expected.upload_key, `upload: the first result is ${got[0] && got[0].key} (want ${expected.upload_key})`);
  ok(got.length > 0 && Math.abs(got[0].score - 1) < 1e-4, `upload: its score is ${got[0] && got[0].score}`);
  await thumbnailsSettled();
  const none = await page.locator('figure.hit .none').count();
  ok(none === expected.no_thumbnail, `upload: ${none} results without a thumbnail (want ${expected.no_thumbnail})`);
  ok(await page.locator('figure.hit img').count() === expected.results - expected.no_thumbnail, 'upload: the other thumbnails are drawn');

  // The first result after the query's own that has a thumbnail (a compressed shard's cannot be read).
  const drawn = page.locator('figure.hit:has(img)').nth(1);
  const secondId = Number(await drawn.getAttribute('data-id'));
  const second = got.find((h) => h.id === secondId);
  await drawn.click();
  await idle();
  got = await results();
  ok(got.length > 0 && got[0].id === second.id, `click: searching from ${second.key} finds it first (got ${got[0] && got[0].key})`);
  ok((await page.locator('#query').textContent()) === second.key, 'click: the query shown is the clicked result');
  await thumbnailsSettled();
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
} catch (e) {
  failures.push(`exception: ${e.stack || e}`);
} finally {
  await browser.close();
}
ok(refusedLoads <= 2 * expected.no_thumbnail, `${refusedLoads} refused thumbnail loads, no more than the ones expected`);
for (const p of problems) failures.push(p);
if (failures.length) {
  console.log(`${failures.length} failure(s):\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
console.log('all search page checks passed');
