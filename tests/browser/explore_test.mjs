// Headless Chromium test of a `vitreg explore` page (static file) or of `vitreg serve` (live URL).
//
//   node tests/browser/explore_test.mjs PAGE_URL EXPECTED_JSON [SCREENSHOT_PNG] [--upload FILE]
//
// PAGE_URL: file://…, http://…, or a plain path. EXPECTED_JSON: {"checks": [{config, layer, head, row, col,
// expected: [N floats]}], "tolerance"?: number}, or "-" for no reference checks. Every check clicks the patch
// and compares what the map draws with the reference row; then keyboard, URL-fragment reload, pinning and
// (live pages) upload are exercised. Any console error or warning, or page error, fails the run.
// Needs Node 18+ and playwright-core (npm install --prefix tests/browser); CHROMIUM overrides /usr/bin/chromium.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const args = process.argv.slice(2);
let uploadFile = null;
const upAt = args.indexOf('--upload');
if (upAt >= 0) { uploadFile = args[upAt + 1]; args.splice(upAt, 2); }
if (args.length < 2 || !uploadFile && upAt >= 0) {
  console.error('usage: node explore_test.mjs PAGE_URL EXPECTED_JSON|- [SCREENSHOT_PNG] [--upload FILE]');
  process.exit(2);
}
const [pageArg, expectedArg, screenshot] = args;
const url = /^[a-z]+:\/\//i.test(pageArg) ? pageArg : pathToFileURL(resolve(pageArg)).href;
const expected = expectedArg === '-' ? { checks: [] } : JSON.parse(readFileSync(expectedArg, 'utf8'));
// One page operation's limit (a live server may run the model for a while); EXPLORE_TEST_TIMEOUT_MS overrides.
const STEP_MS = Number(process.env.EXPLORE_TEST_TIMEOUT_MS) || 60000;

const failures = [];
let passed = 0;
const fail = (msg) => { failures.push(msg); console.log(`FAIL ${msg}`); };
const ok = (cond, msg) => { if (cond) { passed++; console.log(`ok   ${msg}`); } else fail(msg); return cond; };

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
const consoleProblems = [];
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(STEP_MS);
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') consoleProblems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => consoleProblems.push(`page error: ${e.message}`));

  const hook = (fn, arg) => page.evaluate(fn, arg);
  const settle = () => hook(() => window.vitregExplorer.idle());
  async function open(how) {
    await how();
    await page.waitForFunction(() => window.vitregExplorer && window.vitregExplorer.ready);
    await hook(() => window.vitregExplorer.ready);
    await settle();
  }
  const state = () => hook(() => window.vitregExplorer.state());
  const shown = (k) => hook((k) => { const r = window.vitregExplorer.shownRow(k); return r && Array.from(r); }, k);
  const nconfigs = () => page.locator('canvas.map').count();
  async function setLayer(l) {
    await hook((l) => { const e = document.querySelector('#layer'); e.value = String(l); e.dispatchEvent(new Event('input', { bubbles: true })); }, l);
  }
  async function clickPatch(k, r, c) {
    const p = await hook(([k, r, c]) => window.vitregExplorer.cellOf(k, r, c), [k, r, c]);
    await page.mouse.click(p.x, p.y);
    await settle();
  }

  await open(() => page.goto(url));
  const t0 = await hook(() => window.vitregExplorer.timings());
  const n = await nconfigs();
  ok(n > 0, `page ready with ${n} configuration panel(s) (decode ${t0.decodeMs.toFixed(1)} ms, draw ${t0.drawMs.toFixed(1)} ms)`);

  // Reference rows: the map must draw the dequantized row within the quantization error.
  for (const [i, chk] of expected.checks.entries()) {
    const cfg = await hook((k) => window.vitregExplorer.config(k), chk.config);
    if (!ok(cfg, `check ${i}: configuration ${chk.config} exists`)) continue;
    await setLayer(chk.layer);
    await page.selectOption('#head', String(chk.head));
    await clickPatch(chk.config, chk.row, chk.col);
    const st = await state();
    const token = (cfg.class_token ? 1 : 0) + cfg.registers + chk.row * cfg.grid[1] + chk.col;
    const got = (st.tokens ? st.tokens[chk.config] : st.query);
    ok(got === token && st.layer === chk.layer && String(st.head) === String(chk.head) && st.pinned,
      `check ${i}: state query ${got} (want ${token}), layer ${st.layer}, head ${st.head}, pinned ${st.pinned}`);
    const row = await shown(chk.config), want = chk.expected;
    if (!ok(row && row.length === want.length, `check ${i}: shown row has ${row ? row.length : 'no'} values (want ${want.length})`)) continue;
    const max = Math.max(...want);
    const tol = chk.tolerance ?? expected.tolerance ?? (chk.head === 'mean' ? max / 255 : max / 510) + 1e-6;
    let err = 0, at = 0;
    for (let j = 0; j < want.length; j++) { const e = Math.abs(row[j] - want[j]); if (e > err) { err = e; at = j; } }
    ok(err <= tol, `check ${i}: config ${chk.config} layer ${chk.layer} head ${chk.head} patch (${chk.row},${chk.col}): max error ${err.toExponential(3)} at token ${at} (tolerance ${tol.toExponential(3)})`);
  }

  // A patch pinned (the centre of the first panel), so the rest has a query to carry around.
  const cfg0 = await hook(() => window.vitregExplorer.config(0));
  const [gh, gw] = cfg0.grid;
  await clickPatch(0, Math.floor(gh / 2), Math.floor(gw / 2));
  let st = await state();
  ok(st.pinned && st.query >= 0, `clicking patch (${Math.floor(gh / 2)},${Math.floor(gw / 2)}) pins query ${st.query}`);
  const other = await hook(() => window.vitregExplorer.cellOf(0, 0, 0));
  await page.mouse.move(other.x, other.y);
  await settle();
  ok((await state()).query === st.query, 'hovering another patch leaves the pinned query');

  // Keyboard: layer with [ ], head with , .
  await page.locator('footer').click(); // focus away from the controls
  const maxLayer = +(await page.getAttribute('#layer', 'max'));
  const before = await state();
  const [k1, k2, d] = before.layer < maxLayer ? [']', '[', 1] : ['[', ']', -1];
  await page.keyboard.press(k1);
  await settle();
  ok((await state()).layer === before.layer + d, `key ${k1} moves the layer to ${before.layer + d}`);
  await page.keyboard.press(k2);
  await settle();
  ok((await state()).layer === before.layer, `key ${k2} moves it back to ${before.layer}`);
  const heads = await page.$$eval('#head option', (o) => o.map((x) => x.value));
  const next = heads[(heads.indexOf(String(before.head)) + 1) % heads.length];
  await page.keyboard.press('.');
  await settle();
  ok(String((await state()).head) === next, `key . moves the head from ${before.head} to ${next}`);
  await page.keyboard.press(',');
  await settle();
  ok(String((await state()).head) === String(before.head), `key , moves it back to ${before.head}`);

  // The view survives a reload through the URL fragment.
  await setLayer(Math.max(0, maxLayer - 1));
  await settle();
  const saved = await state(), rows = [];
  for (let k = 0; k < n; k++) rows.push(await shown(k));
  const href = page.url();
  ok(href.includes('#') && /layer=\d+/.test(href), `the URL holds the view: ${href.slice(href.indexOf('#'))}`);
  await open(() => page.reload());
  const after = await state();
  ok(JSON.stringify(after) === JSON.stringify(saved), `after reload the state is the same: ${JSON.stringify(after)}`);
  let same = true;
  for (let k = 0; k < n; k++) same = same && JSON.stringify(await shown(k)) === JSON.stringify(rows[k]);
  ok(same, 'after reload every panel draws the same row');

  // A hand-edited fragment is followed, a bad one clamped.
  await hook(() => { location.hash = 'layer=0&head=mean&q=bogus&norms=1'; });
  await page.waitForFunction(() => window.vitregExplorer.state().norms === true);
  await settle();
  st = await state();
  ok(st.layer === 0 && st.head === 'mean' && st.norms, 'a changed fragment changes the view');
  await hook(() => { location.hash = 'layer=99999&head=777&norms=0'; });
  await page.waitForFunction(() => window.vitregExplorer.state().norms === false);
  st = await state();
  ok(st.layer === maxLayer && st.head === 'mean', `an out-of-range fragment is clamped (layer ${st.layer}, head ${st.head})`);

  if (uploadFile) {
    const live = await page.locator('#upload').count();
    if (ok(live === 1, 'the page is live (has #upload)')) {
      const count = (await hook(() => window.vitregExplorer.images())).length;
      await page.setInputFiles('#upload', uploadFile);
      await page.waitForFunction(() => /uploaded|upload failed/.test(document.querySelector('#status').textContent));
      await settle();
      const names = await hook(() => window.vitregExplorer.images());
      st = await state();
      const text = await page.textContent('#status');
      // A new name is added; a name the server already lists is replaced in place.
      ok(/uploaded/.test(text) && names.length >= count && text.includes(`uploaded ${names[st.image]}`),
        `upload shows image ${st.image} ${JSON.stringify(names[st.image])} (${names.length} images, ${count} before): ${text}`);
      await clickPatch(0, 0, 0);
      const r = await shown(0);
      ok(r && r.length > 0 && r.every(Number.isFinite), `the uploaded image draws a row of ${r ? r.length : 0} values`);
    }
  }

  if (screenshot) {
    await setLayer(maxLayer);
    await clickPatch(0, Math.floor(gh / 3), Math.floor(gw / 3));
    await page.mouse.move(2, 2);
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(`screenshot ${screenshot}`);
  }
  const status = await page.textContent('#status');
  console.log(`status line: ${status}`);
} catch (err) {
  fail(`exception: ${err.message.split('\n')[0]}`);
} finally {
  await browser.close();
}
for (const p of consoleProblems) fail(p);
console.log(`${passed} passed, ${failures.length} failed`);
process.exit(failures.length ? 1 : 0);
