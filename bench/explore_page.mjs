// How long an explorer page takes to open in Debian's Chromium (navigation to the first view
// drawn: window.vitregExplorer.ready), over several fresh loads; optionally a screenshot of it.
// The explorer's figure and load times in docs/guide.md come from here.
//
//   node bench/explore_page.mjs URL [--runs 5] [--shot OUT.png] [--viewport 1480x1000]
//   (playwright-core from tests/browser: scripts/setup.sh --tests installs it)
import { chromium } from '../tests/browser/node_modules/playwright-core/index.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : fallback;
};
const runs = +option('--runs', 5);
const shot = option('--shot', '');
const [width, height] = option('--viewport', '1480x1000').split('x').map(Number);
const url = args[0];
if (!url) {
  console.error('usage: node bench/explore_page.mjs URL [--runs N] [--shot OUT.png] [--viewport WxH]');
  process.exit(2);
}
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
const times = [];
const errors = [];
for (let r = 0; r < runs; ++r) {
  const page = await browser.newPage({ viewport: { width, height } });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(e.message));
  const start = Date.now();
  await page.goto(url);
  await page.evaluate(() => window.vitregExplorer.ready);
  times.push({ total: Date.now() - start, ...(await page.evaluate(() => window.vitregExplorer.timings())) });
  if (shot && r === runs - 1) await page.screenshot({ path: shot });
  await page.close();
}
await browser.close();
const median = (key) => times.map((t) => t[key]).sort((a, b) => a - b)[Math.floor(times.length / 2)];
console.log(`${runs} loads: median ${median('total')} ms to the first view (data decoded in ${median('decodeMs').toFixed(0)} ms, ` +
            `drawn in ${median('drawMs').toFixed(1)} ms); all: ${times.map((t) => t.total).join(', ')} ms`);
if (errors.length) {
  console.error('console errors:', errors);
  process.exit(1);
}
