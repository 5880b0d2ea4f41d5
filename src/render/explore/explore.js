// vitreg explore: for one image and each configuration of a model run, where a query token's attention
// goes. The data (format "vitreg-explore/1") is embedded in the page, or fetched from `vitreg serve`
// when the page is live. Plain JavaScript, no dependencies, works from file://, srcdoc and HTTP.
// ASCII only (other characters as \u escapes): the text reads right whatever encoding the host used.
'use strict';
(() => {
  const $ = (sel) => document.querySelector(sel);
  const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));
  const pct = (v) => (100 * v).toFixed(v >= 0.1 ? 1 : 2) + '%';
  const num = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : v.toPrecision(3));

  function el(tag, attrs = {}, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (v !== false && v != null) e.setAttribute(k, v === true ? '' : v);
    }
    e.append(...kids);
    return e;
  }

  // Inferno (matplotlib), 11 stops interpolated to 256: perceptually uniform and readable over photos.
  const LUT = (() => {
    const stops = ['000004', '160b39', '420a68', '6a176e', '932667', 'bc3754', 'dd513a', 'f37819', 'fca50a',
      'f6d746', 'fcffa4'].map((h) => [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16)));
    const lut = new Uint8Array(256 * 3);
    for (let i = 0; i < 256; i++) {
      const t = (i / 255) * (stops.length - 1), a = Math.min(Math.floor(t), stops.length - 2), f = t - a;
      for (let c = 0; c < 3; c++) lut[i * 3 + c] = Math.round(stops[a][c] + (stops[a + 1][c] - stops[a][c]) * f);
    }
    return lut;
  })();
  const lutIndex = (v) => Math.round(clamp(v, 0, 1) * 255) * 3;
  const cssColour = (v) => { const i = lutIndex(v); return `rgb(${LUT[i]},${LUT[i + 1]},${LUT[i + 2]})`; };
  const ALPHA = Math.round(0.6 * 255);
  const SERIES = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];
  const PARTS = [['cls', 'CLS', '#4e79a7'], ['reg', 'registers', '#f28e2b'], ['ttr', 'test-time', '#e15759'],
    ['patch', 'patches', '#59a14f'], ['null', 'null slot', '#9d9d9d']];

  // ---- Q8 blobs: base64 uint8 (maybe zlib) + one float32 scale per row of the last axis ----------------
  function b64bytes(s) {
    if (Uint8Array.fromBase64) return Uint8Array.fromBase64(s);
    const bin = atob(s), out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  async function inflate(bytes) {
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  async function decodeQ8(q, what) {
    if (!Array.isArray(q.shape) || !q.shape.length) throw new Error(`${what}: no shape`);
    const shape = q.shape, n = shape[shape.length - 1], count = shape.reduce((a, b) => a * b, 1);
    let data, sb;
    try {
      data = b64bytes(q.data || '');
      sb = b64bytes(q.scale || '');
    } catch { throw new Error(`${what}: the base64 text is corrupt`); }
    if (q.codec === 'deflate') data = await inflate(data).catch(() => { throw new Error(`${what}: the compressed data is corrupt`); });
    else if (q.codec !== 'raw') throw new Error(`${what}: unknown codec "${q.codec}"`);
    if (data.length !== count || (n > 0 && sb.length !== (count / n) * 4))
      throw new Error(`${what}: ${data.length} bytes and ${sb.length / 4} scales do not fit shape [${shape}]`);
    // Copy the scales so the Float32Array is 4-byte aligned whatever the decoder returned.
    const scale = new Float32Array(sb.buffer.slice(sb.byteOffset, sb.byteOffset + sb.length));
    return { shape, n, data, scale };
  }
  const q8done = new WeakMap(), q8wait = new WeakMap();
  function ensureQ8(q, what) {
    if (!q || q8done.has(q)) return Promise.resolve();
    if (!q8wait.has(q)) q8wait.set(q, decodeQ8(q, what).then((d) => { q8done.set(q, d); }));
    return q8wait.get(q);
  }
  const got = (q) => (q ? q8done.get(q) : undefined);
  // Row r (flat index over the leading axes) dequantized; value = data * that row's scale.
  function row(d, r) {
    const n = d.n, out = new Float32Array(n), s = d.scale[r], o = r * n;
    for (let j = 0; j < n; j++) out[j] = d.data[o + j] * s;
    return out;
  }
  function meanRows(d, rs) {
    const n = d.n, acc = new Float64Array(n);
    for (const r of rs) { const s = d.scale[r], o = r * n; for (let j = 0; j < n; j++) acc[j] += d.data[o + j] * s; }
    return Float32Array.from(acc, (v) => v / rs.length);
  }
  const at = (d, r, j) => d.data[r * d.n + j] * d.scale[r];

  // ---- data --------------------------------------------------------------------------------------------
  const app = $('#app');
  let data;
  try {
    data = JSON.parse($('#vitreg-data').textContent);
  } catch (err) {
    app.textContent = `vitreg explore: the page's data cannot be read (${err.message}).`;
    const failed = Promise.reject(err);
    failed.catch(() => {}); // shown in the page; the hooks still report it
    window.vitregExplorer = { ready: failed, idle: () => failed, state: () => null, shownRow: () => null, cellOf: () => null, config: () => null };
    return;
  }
  const LIVE = !!data.live;
  const images = Array.isArray(data.images) ? data.images.slice() : [];
  const BLOBS = ['norms', 'key_mass', 'abstention', 'rows', 'rollout'];

  function checkEntry(e) {
    if (!e || typeof e.picture !== 'string' || !Array.isArray(e.configs) || !e.configs.length || !(e.width > 0) || !(e.height > 0))
      throw new Error(`image "${e && e.name}": picture, width, height or configs missing`);
    e.configs.forEach((c, k) => {
      const prefix = (c.class_token ? 1 : 0) + (c.registers | 0);
      if (!Array.isArray(c.grid) || c.tokens !== prefix + c.grid[0] * c.grid[1] || !(c.layers > 0) || !(c.heads > 0) || !c.norms)
        throw new Error(`configuration ${k} (${c.label}): inconsistent layers, heads, grid or tokens`);
      const L = c.layers, H = c.heads, N = c.tokens, Qn = Array.isArray(c.queries) ? c.queries.length : 0;
      const want = { norms: [L, N], key_mass: [L, H, N], abstention: [L, H, N], rows: [L, H, Qn, N], rollout: [Qn, N] };
      for (const b of BLOBS) checkShape(c[b], want[b], `configuration ${k} (${c.label}) ${b}`);
    });
    return e;
  }

  // A blob of the wrong shape would be drawn mis-indexed: refuse it instead.
  function checkShape(q, want, what) {
    if (q && (!Array.isArray(q.shape) || q.shape.join() !== want.join()))
      throw new Error(`${what}: shape [${q.shape}], expected [${want}]`);
  }

  const meta = new WeakMap(); // config -> {prefix, qi: token -> index of its stored row, stored: [[r, c, token]]}
  let decodeMs = 0;
  async function prepare(entry) {
    if (entry.prepared) return entry.prepared;
    entry.prepared = (async () => {
      checkEntry(entry);
      const t0 = performance.now();
      const pic = new Image();
      pic.src = entry.picture;
      await pic.decode().catch(() => { throw new Error(`image "${entry.name}": the picture cannot be decoded`); });
      const jobs = [];
      entry.configs.forEach((c, k) => BLOBS.forEach((b) => jobs.push(ensureQ8(c[b], `${c.label || k} ${b}`))));
      await Promise.all(jobs);
      for (const c of entry.configs) {
        const prefix = (c.class_token ? 1 : 0) + c.registers, gw = c.grid[1];
        const qs = Array.isArray(c.queries) ? c.queries : [];
        const qi = new Map(qs.map((t, i) => [t, i]));
        const stored = c.rows ? qs.filter((t) => t >= prefix).map((t) => [Math.floor((t - prefix) / gw), (t - prefix) % gw, t]) : [];
        meta.set(c, { prefix, qi, stored });
      }
      decodeMs = performance.now() - t0;
      return pic;
    })();
    entry.prepared.catch(() => { entry.prepared = null; }); // a failed image may be retried
    return entry.prepared;
  }

  // ---- view state (mirrored in the URL fragment) -------------------------------------------------------
  // The query is kept independent of any configuration's token order: CLS, register i, or a point of the
  // picture (a patch of each configuration's own grid), so configurations with other grids still agree.
  const NONE = { kind: 'none' };
  const S = { image: 0, layer: Infinity, head: 'mean', q: NONE, norms: false, outlines: true, rollout: false, regs: true, pinned: false };
  let view = null;         // {entry, pic, maxL, maxH} of the image on screen
  let panels = [];
  let loading = null;      // name of the image being fetched/decoded
  let note = '', noteError = false;
  let pendingHash = null;  // fragment values waiting for their image
  const say = (text, error = false) => { note = text; noteError = error; invalidate(); };
  const cfgs = () => (view ? view.entry.configs : []);

  function tokenOf(k, q = S.q) {
    const c = cfgs()[k];
    if (!c) return -1;
    const { prefix } = meta.get(c), cls = c.class_token ? 1 : 0;
    if (q.kind === 'cls') return cls ? 0 : -1;
    if (q.kind === 'reg') return q.i < c.registers ? cls + q.i : -1;
    if (q.kind !== 'patch') return -1;
    const [gh, gw] = c.grid, e = view.entry;
    const r = clamp(Math.floor((q.y / e.height) * gh), 0, gh - 1), cc = clamp(Math.floor((q.x / e.width) * gw), 0, gw - 1);
    return prefix + r * gw + cc;
  }
  function patchQuery(k, r, c) {
    const [gh, gw] = cfgs()[k].grid, e = view.entry;
    return { kind: 'patch', x: ((c + 0.5) * e.width) / gw, y: ((r + 0.5) * e.height) / gh };
  }
  function queryOfToken(k, t) {
    const c = cfgs()[k], { prefix } = meta.get(c), cls = c.class_token ? 1 : 0;
    if (!(t >= 0 && t < c.tokens)) return NONE;
    if (t < cls) return { kind: 'cls' };
    if (t < prefix) return { kind: 'reg', i: t - cls };
    return patchQuery(k, Math.floor((t - prefix) / c.grid[1]), (t - prefix) % c.grid[1]);
  }
  function describe(k, t) {
    const c = cfgs()[k];
    if (!c || t < 0) return 'none';
    const { prefix } = meta.get(c), cls = c.class_token ? 1 : 0;
    if (t < cls) return 'CLS';
    if (t < prefix) {
      const i = t - cls, plain = c.registers - (c.test_time_registers | 0);
      return i < plain ? `register ${i}` : `test-time register ${i - plain}`;
    }
    return `patch (${Math.floor((t - prefix) / c.grid[1])},${(t - prefix) % c.grid[1]})`;
  }
  // The query in words, from the first configuration that has it.
  function queryText() {
    const k = cfgs().findIndex((_, j) => tokenOf(j) >= 0);
    return k < 0 ? (S.q.kind === 'none' ? 'none' : 'a token no configuration has') : describe(k, tokenOf(k));
  }
  const stored = (k, t) => LIVE || (cfgs()[k].rows != null && meta.get(cfgs()[k]).qi.has(t));

  // The nearest patch of configuration k with a stored row (static pages may store a stride subset).
  function nearestStored(k, r, c) {
    let best = null, bd = Infinity;
    for (const s of meta.get(cfgs()[k]).stored) {
      const d = (s[0] - r) ** 2 + (s[1] - c) ** 2;
      if (d < bd) { bd = d; best = s; }
    }
    return best;
  }
  function pickPatch(k, r, c, pin) {
    const c0 = cfgs()[k], t = meta.get(c0).prefix + r * c0.grid[1] + c;
    let q = patchQuery(k, r, c), msg = '';
    if (!stored(k, t) && !S.norms) {
      const s = nearestStored(k, r, c);
      if (s) { q = patchQuery(k, s[0], s[1]); msg = `patch (${r},${c}) has no stored row; showing the nearest stored query, patch (${s[0]},${s[1]})`; }
    }
    setQuery(q, pin, msg);
  }
  function setQuery(q, pin, msg = '') {
    S.q = q;
    if (pin) for (const [key, e] of liveRows) if (e.status === 'error') liveRows.delete(key); // a click retries
    if (pin !== undefined) S.pinned = pin;
    say(msg);
  }

  // ---- what each panel shows ---------------------------------------------------------------------------
  // {values (Float32Array over all tokens) | why (a reason nothing is shown), what}
  const liveRows = new Map(); // "image\nconfig\ntoken" -> {status, rows, rollout, hasRollout, error}
  function rowSource(k, t, wantRollout) {
    const c = cfgs()[k];
    if (!LIVE) {
      if (!c.rows) return { why: 'this page stores no attention rows (n: norms)' };
      const qi = meta.get(c).qi.get(t);
      if (qi === undefined) return { why: `no stored row for ${describe(k, t)}` };
      return { rows: got(c.rows), rollout: got(c.rollout), hasRollout: true, qi, qn: c.queries.length };
    }
    const e = liveRows.get(`${view.entry.name}\n${k}\n${t}`);
    if (!e || (e.status === 'ok' && wantRollout && !e.hasRollout)) { wantRows(k, t, wantRollout); }
    if (!e || e.status === 'loading') return { why: 'loading\u2026', waiting: true };
    if (e.status === 'error') return { why: e.error };
    if (wantRollout && !e.hasRollout) return { why: 'loading the rollout\u2026', waiting: true };
    return { rows: e.rows, rollout: e.rollout, hasRollout: e.hasRollout, qi: 0, qn: 1 };
  }
  function layerRow(k, t, layer, head) {
    const c = cfgs()[k];
    if (layer >= c.layers) return { why: `${c.label} has ${c.layers} layers` };
    if (head !== 'mean' && head >= c.heads) return { why: `${c.label} has ${c.heads} heads` };
    const src = rowSource(k, t, S.rollout);
    if (!src.rows) return src;
    const r = (h) => (layer * c.heads + h) * src.qn + src.qi;
    return { values: head === 'mean' ? meanRows(src.rows, [...Array(c.heads).keys()].map(r)) : row(src.rows, r(head)) };
  }
  const headText = (c, head) => (head === 'mean' ? `mean of ${c.heads} heads` : `head ${head}`);
  function shown(k) {
    const c = cfgs()[k], t = tokenOf(k), L = S.layer;
    if (S.norms) {
      if (L >= c.layers) return { why: `${c.label} has ${c.layers} layers` };
      return { values: row(got(c.norms), L), what: `norms \u00b7 layer ${L}` };
    }
    if (S.q.kind === 'none') {
      const km = got(c.key_mass);
      if (!km) return { why: 'no key mass stored' };
      if (L >= c.layers) return { why: `${c.label} has ${c.layers} layers` };
      if (S.head !== 'mean' && S.head >= c.heads) return { why: `${c.label} has ${c.heads} heads` };
      const r = (h) => L * c.heads + h;
      return {
        values: S.head === 'mean' ? meanRows(km, [...Array(c.heads).keys()].map(r)) : row(km, r(S.head)),
        what: `attention received (mean of queries) \u00b7 layer ${L} \u00b7 ${headText(c, S.head)}`,
      };
    }
    if (t < 0) return { why: `no ${S.q.kind === 'cls' ? 'CLS' : `register ${S.q.i}`} in this configuration` };
    if (S.rollout) {
      const src = rowSource(k, t, true);
      if (!src.rows) return src;
      if (!src.rollout) return { why: 'no rollout was computed' };
      return { values: row(src.rollout, src.qi), what: `${describe(k, t)} \u00b7 rollout (all layers, mean of heads)` };
    }
    const v = layerRow(k, t, L, S.head);
    if (v.values) v.what = `${describe(k, t)} \u00b7 layer ${L} \u00b7 ${headText(c, S.head)}`;
    return v;
  }
  // Null-slot mass of query t (1 - its row's sum), the mean over heads for the mean head.
  function abstention(k, t, layer, head) {
    const c = cfgs()[k], d = got(c.abstention);
    if (!d || t < 0 || layer >= c.layers || (head !== 'mean' && head >= c.heads)) return null;
    if (head !== 'mean') return at(d, layer * c.heads + head, t);
    let s = 0;
    for (let h = 0; h < c.heads; h++) s += at(d, layer * c.heads + h, t);
    return s / c.heads;
  }

  // ---- live data ---------------------------------------------------------------------------------------
  let inflight = 0;
  const wanted = [], busy = [];
  async function api(url, opts) {
    let res;
    try { res = await fetch(url, opts); } catch (err) { throw new Error(`${url.split('?')[0]}: ${err.message}`); }
    let body = null;
    try { body = JSON.parse(await res.text()); } catch { /* an error page that is not JSON */ }
    if (!res.ok) throw new Error((body && body.error) || `${url.split('?')[0]}: ${res.status} ${res.statusText}`);
    if (!body) throw new Error(`${url.split('?')[0]}: the reply is not JSON`);
    return body;
  }
  // One request per configuration at a time; while it runs only the latest wanted query is remembered,
  // so sweeping the mouse over a big grid does not queue hundreds of fetches.
  function wantRows(k, t, rollout) {
    const key = `${view.entry.name}\n${k}\n${t}`;
    wanted[k] = { key, name: view.entry.name, k, t, rollout };
    pump(k);
  }
  async function pump(k) {
    if (busy[k] || !wanted[k]) return;
    const w = wanted[k];
    wanted[k] = null;
    const old = liveRows.get(w.key);
    if (old && old.status === 'ok' && (old.hasRollout || !w.rollout)) { pump(k); return; }
    busy[k] = true;
    inflight++;
    if (!old || old.status !== 'ok') liveRows.set(w.key, { status: 'loading' });
    try {
      const j = await api(`api/rows?image=${encodeURIComponent(w.name)}&config=${w.k}&query=${w.t}&rollout=${w.rollout ? 1 : 0}`);
      const c = view.entry.name === w.name ? cfgs()[w.k] : null;
      if (!j.rows || !c) throw new Error(j.rows ? 'the image changed' : 'the server sent no rows');
      checkShape(j.rows, [c.layers, c.heads, 1, c.tokens], 'api/rows rows');
      checkShape(j.rollout, [1, c.tokens], 'api/rows rollout');
      await Promise.all([ensureQ8(j.rows, 'rows'), ensureQ8(j.rollout, 'rollout')]);
      liveRows.set(w.key, { status: 'ok', rows: got(j.rows), rollout: got(j.rollout) || null, hasRollout: w.rollout || !!j.rollout });
    } catch (err) {
      liveRows.set(w.key, { status: 'error', error: err.message });
      say(err.message, true);
    }
    busy[k] = false;
    inflight--;
    invalidate();
    pump(k);
  }
  let uploading = 0;
  async function upload(file) {
    if (!file) return;
    if (!LIVE) { say('uploading needs a live page (vitreg serve)', true); return; }
    uploading++;
    say(`uploading ${file.name} and running the model\u2026`);
    try {
      // Percent-encoded so names outside ISO-8859-1 survive an HTTP header; plain ASCII names are unchanged.
      const entry = checkEntry(await api('api/upload', { method: 'POST', body: file, headers: { 'X-Filename': encodeURIComponent(file.name) } }));
      let i = images.findIndex((e) => e.name === entry.name);
      if (i < 0) i = images.push(entry) - 1; else images[i] = entry;
      for (const key of [...liveRows.keys()]) if (key.startsWith(entry.name + '\n')) liveRows.delete(key);
      fillImages();
      pendingHash = null;
      await selectImage(i);
      say(`uploaded ${entry.name}`);
    } catch (err) {
      say(`upload failed: ${err.message}`, true);
    } finally {
      uploading--;
      invalidate();
    }
  }

  // ---- page skeleton -----------------------------------------------------------------------------------
  // The artifact rule the outlines follow, as the data states it (every configuration shares it).
  const RULE_TEXT = data.images?.[0]?.configs?.[0]?.artifact_rule?.text || 'norm > median + k\u00b7MAD';
  const toggle = (id, key, text, hint) => el('label', { class: 'toggle', title: hint },
    el('input', { type: 'checkbox', id, onchange: (e) => { S[key] = e.target.checked; say(''); } }), text);
  const ui = {
    image: el('select', { id: 'image', title: 'image', onchange: (e) => { pendingHash = null; selectImage(+e.target.value); } }),
    layer: el('input', { id: 'layer', type: 'range', min: 0, max: 0, value: 0, oninput: (e) => { S.layer = +e.target.value; invalidate(); } }),
    layerOut: el('output', { class: 'num', for: 'layer' }),
    head: el('select', { id: 'head', title: 'head', onchange: (e) => { S.head = e.target.value === 'mean' ? 'mean' : +e.target.value; invalidate(); } }),
    status: el('div', { id: 'status', role: 'status' }),
    panels: el('div', { id: 'panels' }),
    token: el('aside', { id: 'token' }),
    help: el('div', { id: 'help', class: 'overlay', hidden: true, onclick: () => { ui.help.hidden = true; } }),
  };
  const controls = el('div', { class: 'controls' },
    el('label', {}, 'image ', ui.image),
    LIVE ? el('label', { class: 'upload', title: 'or drop an image file onto the page' }, 'upload\u2026',
      el('input', { id: 'upload', type: 'file', accept: 'image/*', onchange: (e) => { upload(e.target.files[0]); e.target.value = ''; } })) : '',
    el('label', {}, 'layer ', ui.layer, ui.layerOut),
    el('label', {}, 'head ', ui.head),
    toggle('toggle-norms', 'norms', 'norms', 'show token norms instead of attention (n)'),
    toggle('toggle-outlines', 'outlines', 'outlines', `outline the layer's artifact patches: ${RULE_TEXT} (o)`),
    toggle('toggle-rollout', 'rollout', 'rollout', 'show attention rollout over all layers (r)'),
    toggle('toggle-regs', 'regs', "registers' share", 'show CLS, registers and the null slot (g)'),
    el('button', { type: 'button', class: 'help-button', title: 'keyboard (?)', onclick: () => { ui.help.hidden = !ui.help.hidden; } }, '?'));
  ui.help.append(el('div', { class: 'help-box' }, el('h2', { text: 'Keyboard' }), el('dl', {}, ...[
    ['hover / click', 'preview / pin a query patch'], ['arrows', 'move the query patch'], ['[ ]', 'layer down / up'],
    [', .', 'previous / next head (mean, 0 \u2026 H\u22121)'], ['c', 'CLS as query'], ['1 \u2026 9', 'register as query'],
    ['n', 'norms'], ['o', 'outlines'], ['r', 'rollout'], ['g', "registers' share"], ['Esc', 'unpin (again: clear the query)'],
    ['?', 'this help']].flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })]))));
  document.title = data.title || 'vitreg explore';
  // An empty icon, so a served page does not make the browser ask the server for /favicon.ico.
  if (!document.querySelector('link[rel~="icon"]')) document.head.append(el('link', { rel: 'icon', href: 'data:,' }));
  app.append(
    el('header', {}, el('h1', { text: data.title || 'vitreg explore' }), controls, ui.status),
    el('main', {}, ui.panels, ui.token),
    el('footer', { text: `${data.format || 'vitreg-explore/?'} \u00b7 made by vitreg` }), ui.help);

  function fillImages() {
    ui.image.replaceChildren(...images.map((e, i) => el('option', { value: i, text: e.name || `image ${i}` })));
    ui.image.disabled = images.length < 2;
  }

  function buildPanels() {
    const e = view.entry, side = Math.max(e.width, e.height);
    const scale = Math.max(1, Math.round(400 / side)); // an integer upscale of the model input, ~320-448 px
    panels = e.configs.map((c, k) => {
      const canvas = el('canvas', { class: 'map', 'data-config': k, width: e.width * scale, height: e.height * scale,
        'aria-label': `attention map of ${c.label}` });
      const heat = el('canvas', { width: c.grid[1], height: c.grid[0] });
      const hctx = heat.getContext('2d');
      const p = { canvas, ctx: canvas.getContext('2d'), heat, hctx, pixels: hctx.createImageData(c.grid[1], c.grid[0]),
        strip: el('div', { class: 'strip' }), cells: [], what: el('span'), max: el('span', { class: 'max' }) };
      p.view = el('div', { class: 'view' }, p.what, p.max);
      const cell = (ev) => {
        const r = canvas.getBoundingClientRect();
        return [clamp(Math.floor(((ev.clientY - r.top) / r.height) * c.grid[0]), 0, c.grid[0] - 1),
          clamp(Math.floor(((ev.clientX - r.left) / r.width) * c.grid[1]), 0, c.grid[1] - 1)];
      };
      let last = '';
      canvas.addEventListener('mousemove', (ev) => {
        const rc = cell(ev), key = rc.join();
        if (S.pinned || key === last) return;
        last = key;
        pickPatch(k, rc[0], rc[1], false);
      });
      canvas.addEventListener('mouseleave', () => { last = ''; });
      canvas.addEventListener('click', (ev) => { const rc = cell(ev); last = rc.join(); pickPatch(k, rc[0], rc[1], true); });
      // CLS, each register, the null slot: coloured on the map's scale, labelled with their share.
      const { prefix } = meta.get(c), cls = c.class_token ? 1 : 0, plain = c.registers - (c.test_time_registers | 0);
      for (let t = 0; t <= prefix; t++) {
        const name = t === prefix ? '\u2205' : t < cls ? 'CLS' : t - cls < plain ? `R${t - cls}` : `T${t - cls - plain}`;
        const q = t === prefix ? null : t < cls ? { kind: 'cls' } : { kind: 'reg', i: t - cls };
        const b = el('button', { type: 'button', class: 'cell', title: t === prefix ? 'null slot (abstention)' : describe(k, t),
          disabled: !q, onclick: () => setQuery(q, true) }, el('b', { text: name }), el('span'));
        p.cells.push(b);
        p.strip.append(b);
      }
      const fig = el('figure', { class: 'panel' }, canvas, p.strip, el('figcaption', {},
        el('div', { class: 'label', text: c.label || `configuration ${k}` }),
        el('div', { class: 'meta', text: [c.attention, c.precision, c.intervention && `intervention ${c.intervention}`].filter(Boolean).join(' \u00b7 ') }),
        p.view));
      fig.style.width = `${canvas.width}px`; // fixed geometry: hovering must never reflow the panels
      p.fig = fig;
      return p;
    });
    ui.panels.replaceChildren(...panels.map((p) => p.fig));
  }

  // ---- drawing -----------------------------------------------------------------------------------------
  function drawPanel(k) {
    const c = cfgs()[k], p = panels[k], ctx = p.ctx, W = p.canvas.width, H = p.canvas.height;
    const [gh, gw] = c.grid, { prefix } = meta.get(c), cw = W / gw, ch = H / gh;
    const v = shown(k), t = tokenOf(k);
    ctx.imageSmoothingEnabled = false;
    ctx.globalAlpha = 1;
    ctx.drawImage(view.pic, 0, 0, W, H);
    let max = 0;
    if (v.values) {
      for (let j = prefix; j < c.tokens; j++) max = Math.max(max, v.values[j]);
      const px = p.pixels.data, inv = max > 0 ? 1 / max : 0;
      for (let j = 0; j < gh * gw; j++) {
        const i = lutIndex(v.values[prefix + j] * inv);
        px[j * 4] = LUT[i]; px[j * 4 + 1] = LUT[i + 1]; px[j * 4 + 2] = LUT[i + 2]; px[j * 4 + 3] = ALPHA;
      }
      p.hctx.putImageData(p.pixels, 0, 0);
      ctx.drawImage(p.heat, 0, 0, W, H);
    } else {
      // Nothing rather than wrong data: grey the picture and say why on it.
      ctx.fillStyle = 'rgba(255,255,255,0.55)';
      ctx.fillRect(0, 0, W, H);
      ctx.fillStyle = '#333';
      ctx.font = '13px system-ui, sans-serif';
      ctx.textAlign = 'center';
      ctx.fillText(v.why || '', W / 2, H / 2, W - 16);
    }
    if (S.outlines && S.layer < c.layers && Array.isArray(c.outlines) && c.outlines[S.layer]) {
      ctx.strokeStyle = '#4dff88';
      ctx.lineWidth = 1;
      for (const o of c.outlines[S.layer]) {
        if (o < prefix || o >= c.tokens) continue;
        const j = o - prefix;
        ctx.strokeRect((j % gw) * cw + 0.5, Math.floor(j / gw) * ch + 0.5, cw - 1, ch - 1);
      }
    }
    if (t >= prefix) {
      const j = t - prefix, x = (j % gw) * cw, y = Math.floor(j / gw) * ch;
      ctx.lineWidth = 2;
      ctx.strokeStyle = '#000';
      ctx.strokeRect(x - 1, y - 1, cw + 2, ch + 2);
      ctx.strokeStyle = S.pinned ? '#00e5ff' : '#fff';
      ctx.strokeRect(x + 1, y + 1, cw - 2, ch - 2);
    }
    p.strip.hidden = !S.regs;
    if (S.regs) {
      const attention = v.values && !S.norms && S.q.kind !== 'none';
      p.cells.forEach((b, i) => {
        const isNull = i === prefix;
        let val = null;
        if (isNull) { if (attention && !S.rollout) val = abstention(k, t, S.layer, S.head); } else if (v.values) val = v.values[i];
        b.style.background = val == null ? '' : cssColour(max > 0 ? val / max : 0);
        b.classList.toggle('dark', val != null && (max > 0 ? val / max : 0) < 0.62);
        b.classList.toggle('query', !isNull && i === t);
        b.lastChild.textContent = val == null ? '\u2014' : S.norms ? num(val) : pct(val);
      });
    }
    // One line either way (the full text in the tooltip), so captions keep their height.
    p.what.textContent = p.view.title = v.values ? v.what : v.why || '';
    p.max.textContent = v.values ? `max ${S.norms ? num(max) : max.toPrecision(3)}` : '';
    p.view.classList.toggle('note', !v.values);
  }

  function svgEl(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  }
  // The token's norm across layers, one line per configuration, robust thresholds dashed.
  function normChart(toks) {
    const W = 340, H = 150, m = { l: 42, r: 8, t: 8, b: 22 };
    const maxL = view.maxL, series = [];
    let ymax = 0;
    cfgs().forEach((c, k) => {
      if (toks[k] < 0) return;
      const d = got(c.norms), vals = [];
      for (let l = 0; l < c.layers; l++) vals.push(at(d, l, toks[k]));
      const thr = Array.isArray(c.robust_threshold) ? c.robust_threshold.slice(0, c.layers) : [];
      ymax = Math.max(ymax, ...vals, ...thr.filter(Number.isFinite));
      series.push({ k, vals, thr });
    });
    ymax = ymax > 0 ? ymax * 1.05 : 1;
    const x = (l) => m.l + (maxL > 1 ? l / (maxL - 1) : 0.5) * (W - m.l - m.r), y = (v) => H - m.b - (v / ymax) * (H - m.t - m.b);
    const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart', role: 'img' });
    const text = (tx, ty, s, cls) => { const e = svgEl('text', { x: tx, y: ty, class: cls }); e.textContent = s; svg.append(e); };
    for (const f of [0, 0.5, 1]) {
      svg.append(svgEl('line', { x1: m.l, x2: W - m.r, y1: y(f * ymax), y2: y(f * ymax), class: 'grid' }));
      text(m.l - 4, y(f * ymax) + 4, num(f * ymax), 'ty');
    }
    for (const l of new Set([0, Math.floor((maxL - 1) / 2), maxL - 1])) text(x(l), H - 6, String(l), 'tx');
    svg.append(svgEl('line', { x1: x(S.layer), x2: x(S.layer), y1: m.t, y2: H - m.b, class: 'cursor' }));
    for (const s of series) {
      const colour = SERIES[s.k % SERIES.length];
      if (s.thr.length) svg.append(svgEl('polyline', { points: s.thr.map((v, l) => `${x(l)},${y(v)}`).join(' '), stroke: colour, class: 'thr' }));
      svg.append(svgEl('polyline', { points: s.vals.map((v, l) => `${x(l)},${y(v)}`).join(' '), stroke: colour, class: 'line' }));
      if (S.layer < s.vals.length) svg.append(svgEl('circle', { cx: x(S.layer), cy: y(s.vals[S.layer]), r: 3, fill: colour }));
    }
    return { svg, series };
  }
  // Where the token's attention goes in the chosen layer and head.
  function massBar(k, t) {
    const c = cfgs()[k], v = layerRow(k, t, S.layer, S.head);
    if (!v.values) return el('div', { class: 'note', text: v.why });
    const { prefix } = meta.get(c), cls = c.class_token ? 1 : 0, plain = c.registers - (c.test_time_registers | 0);
    const part = { cls: 0, reg: 0, ttr: 0, patch: 0, null: abstention(k, t, S.layer, S.head) || 0 };
    for (let j = 0; j < c.tokens; j++) part[j < cls ? 'cls' : j < cls + plain ? 'reg' : j < prefix ? 'ttr' : 'patch'] += v.values[j];
    const total = PARTS.reduce((s, [p]) => s + part[p], 0) || 1;
    const present = PARTS.filter(([p]) => (p === 'cls' ? cls : p === 'reg' ? plain : p === 'ttr' ? c.test_time_registers : true));
    return el('div', { class: 'mass' },
      el('div', { class: 'bar' }, ...present.map(([p, name, colour]) => el('span', { style: `width:${(100 * part[p]) / total}%;background:${colour}`, title: `${name} ${pct(part[p])}` }))),
      el('div', { class: 'nums' }, ...present.map(([p, name, colour]) => el('span', {}, el('i', { style: `background:${colour}` }), `${name} ${pct(part[p])}`))));
  }
  function drawToken() {
    const toks = cfgs().map((_, k) => tokenOf(k));
    const box = [];
    if (S.q.kind === 'none') {
      box.push(el('h2', { text: 'No query' }), el('p', { class: 'hint', text: 'Hover or click a patch, or press c for CLS, 1-9 for a register. Until then the maps show the attention each patch receives.' }));
    } else {
      const same = toks.every((t) => t === toks[0]);
      box.push(el('h2', { text: `${queryText()}${same && toks[0] >= 0 ? ` \u00b7 token ${toks[0]}` : ''}${S.pinned ? ' \u00b7 pinned' : ''}` }));
      const { svg, series } = normChart(toks);
      box.push(el('h3', { text: 'Norm across layers' }), svg, el('div', { class: 'legend' }, ...series.map((s) => el('div', {},
        el('i', { style: `background:${SERIES[s.k % SERIES.length]}` }), `${cfgs()[s.k].label}${same ? '' : ` (token ${toks[s.k]})`}: `,
        el('b', { text: S.layer < s.vals.length ? num(s.vals[S.layer]) : '\u2014' }), S.layer < s.thr.length ? ` (threshold ${num(s.thr[S.layer])})` : ''))));
      box.push(el('h3', { text: `Attention mass \u00b7 layer ${S.layer} \u00b7 ${S.head === 'mean' ? 'mean of heads' : `head ${S.head}`}` }));
      cfgs().forEach((c, k) => box.push(el('div', { class: 'mass-label', text: c.label }), toks[k] < 0 ? el('div', { class: 'note', text: 'no such token' }) : massBar(k, toks[k])));
    }
    ui.token.replaceChildren(...box);
  }

  function syncControls() {
    ui.image.value = String(S.image);
    if (!view) return;
    ui.layer.max = view.maxL - 1;
    ui.layer.value = S.layer;
    ui.layerOut.value = `${S.layer}/${view.maxL - 1}`;
    if (ui.head.options.length !== view.maxH + 1)
      ui.head.replaceChildren(el('option', { value: 'mean', text: 'mean' }), ...[...Array(view.maxH).keys()].map((h) => el('option', { value: h, text: h })));
    ui.head.value = String(S.head);
    for (const key of ['norms', 'outlines', 'rollout', 'regs']) $(`#toggle-${key}`).checked = S[key];
  }
  function status() {
    let text;
    if (loading) text = LIVE ? `running the model on ${loading}\u2026` : `decoding ${loading}\u2026`;
    else if (!view) text = images.length ? '' : LIVE ? 'no images yet: upload one (or drop it onto the page)' : 'this page holds no images';
    else {
      const q = S.q.kind === 'none' ? 'no query' : `query ${queryText()}${S.pinned ? ' (pinned)' : ''}`;
      text = `${view.entry.name} \u00b7 ${S.rollout ? 'rollout' : `layer ${S.layer} \u00b7 head ${S.head}`} \u00b7 ${q}${inflight ? ' \u00b7 fetching rows\u2026' : ''}`;
    }
    ui.status.textContent = note ? (text ? `${text} \u2014 ${note}` : note) : text;
    ui.status.classList.toggle('error', noteError);
  }

  let drawQueued = false, firstDrawn = false, drawMs = 0;
  let readyResolve, readyReject;
  const ready = new Promise((res, rej) => { readyResolve = res; readyReject = rej; });
  ready.catch(() => {}); // a failed start is shown in the page; the test hook still sees the rejection
  function invalidate() {
    if (drawQueued) return;
    drawQueued = true;
    queueMicrotask(render); // coalesces the state changes of one event into one draw
  }
  function render() {
    drawQueued = false;
    const t0 = performance.now();
    syncControls();
    ui.panels.classList.toggle('loading', !!loading);
    if (view) {
      cfgs().forEach((_, k) => drawPanel(k));
      drawToken();
      writeHash();
    }
    status();
    drawMs = performance.now() - t0;
    if (!firstDrawn && (view || (!loading && !images.length))) { firstDrawn = true; readyResolve(); }
    checkIdle();
  }
  let idleWaiters = [];
  function checkIdle() {
    if (drawQueued || inflight || loading || uploading || wanted.some(Boolean)) return;
    const w = idleWaiters;
    idleWaiters = [];
    w.forEach((f) => f());
  }

  // ---- URL fragment ------------------------------------------------------------------------------------
  function qParam() {
    if (S.q.kind === 'none') return 'none';
    const t = tokenOf(0);
    return t >= 0 ? String(t) : S.q.kind === 'cls' ? 'cls' : S.q.kind === 'reg' ? `r${S.q.i}` : 'none';
  }
  function writeHash() {
    const p = new URLSearchParams({ img: S.image, layer: S.layer, head: S.head, q: qParam(),
      norms: +S.norms, outlines: +S.outlines, rollout: +S.rollout, regs: +S.regs, pin: +S.pinned });
    const h = '#' + p.toString();
    if (h === location.hash) return;
    try { history.replaceState(null, '', h); } catch { /* a sandboxed frame may refuse; the view still works */ }
  }
  function readHash() {
    let p;
    try { p = new URLSearchParams(location.hash.slice(1)); } catch { return {}; }
    const int = (k) => (/^\d+$/.test(p.get(k) || '') ? +p.get(k) : null);
    const bool = (k) => (p.get(k) === '1' || p.get(k) === 'true' ? true : p.get(k) === '0' || p.get(k) === 'false' ? false : null);
    return { img: int('img'), layer: int('layer'), head: p.get('head'), q: p.get('q'),
      norms: bool('norms'), outlines: bool('outlines'), rollout: bool('rollout'), regs: bool('regs'), pin: bool('pin') };
  }
  function applyHash(h) {
    for (const key of ['norms', 'outlines', 'rollout', 'regs']) if (h[key] != null) S[key] = h[key];
    if (h.layer != null) S.layer = h.layer;
    if (h.head === 'mean') S.head = 'mean'; else if (/^\d+$/.test(h.head || '')) S.head = +h.head;
    const q = h.q || '';
    if (q === 'cls') S.q = { kind: 'cls' };
    else if (/^r\d+$/.test(q)) S.q = { kind: 'reg', i: +q.slice(1) };
    else if (/^\d+$/.test(q)) S.q = queryOfToken(0, +q);
    else if (q === 'none') S.q = NONE;
    if (h.pin != null) S.pinned = h.pin && S.q.kind !== 'none';
    clampState();
  }
  function clampState() {
    if (!view) return;
    S.layer = clamp(Number.isFinite(S.layer) ? S.layer : view.maxL - 1, 0, view.maxL - 1);
    if (S.head !== 'mean') S.head = S.head >= 0 && S.head < view.maxH ? S.head : 'mean';
  }
  window.addEventListener('hashchange', () => {
    const h = readHash();
    if (!view) { pendingHash = h; return; }
    if (h.img != null && h.img !== S.image && h.img < images.length) { pendingHash = h; selectImage(h.img); return; }
    applyHash(h);
    say('');
  });

  // ---- images ------------------------------------------------------------------------------------------
  let loadSeq = 0;
  async function selectImage(i) {
    if (!images.length) { invalidate(); return; }
    S.image = clamp(i | 0, 0, images.length - 1);
    const seq = ++loadSeq;
    let entry = images[S.image];
    loading = entry.name || `image ${S.image}`;
    invalidate();
    try {
      if (LIVE && !entry.configs) {
        entry = checkEntry(await api(`api/image?name=${encodeURIComponent(entry.name)}`));
        if (seq !== loadSeq) return;
        images[S.image] = entry;
        fillImages();
      }
      const pic = await prepare(entry);
      if (seq !== loadSeq) return;
      view = { entry, pic, maxL: Math.max(...entry.configs.map((c) => c.layers)), maxH: Math.max(...entry.configs.map((c) => c.heads)) };
      buildPanels();
      if (pendingHash) { applyHash(pendingHash); pendingHash = null; }
      clampState();
      loading = null;
      say('');
    } catch (err) {
      if (seq !== loadSeq) return;
      loading = null;
      if (view) S.image = Math.max(0, images.indexOf(view.entry)); // stay on the image still on screen
      say(err.message, true);
      if (!firstDrawn) readyReject(err);
    }
  }

  // ---- input -------------------------------------------------------------------------------------------
  function moveQuery(dr, dc) {
    if (!view) return;
    const c = cfgs()[0], { prefix } = meta.get(c), [gh, gw] = c.grid, t = tokenOf(0);
    let r = Math.floor(gh / 2), cc = Math.floor(gw / 2);
    if (t >= prefix) {
      r = Math.floor((t - prefix) / gw); cc = (t - prefix) % gw;
      // Step over patches without stored rows (a stride subset), else one patch.
      let nr = r + dr, nc = cc + dc;
      while (nr >= 0 && nr < gh && nc >= 0 && nc < gw && !stored(0, prefix + nr * gw + nc) && !S.norms) { nr += dr; nc += dc; }
      if (nr >= 0 && nr < gh && nc >= 0 && nc < gw) { r = nr; cc = nc; } else { r = clamp(r + dr, 0, gh - 1); cc = clamp(cc + dc, 0, gw - 1); }
    }
    pickPatch(0, r, cc, true);
  }
  function cycleHead(step) {
    const n = view.maxH + 1, i = S.head === 'mean' ? 0 : S.head + 1, j = (i + step + n) % n;
    S.head = j === 0 ? 'mean' : j - 1;
  }
  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || !view) return;
    const t = e.target, tag = t.tagName;
    if (t.isContentEditable || tag === 'TEXTAREA' || (tag === 'INPUT' && !['range', 'checkbox', 'file', 'button'].includes(t.type))) return;
    // A focused control keeps its own navigation keys; every other shortcut works from anywhere.
    if ((tag === 'INPUT' || tag === 'SELECT' || tag === 'BUTTON') && (e.key.startsWith('Arrow') || [' ', 'Enter', 'Tab'].includes(e.key))) return;
    const k = e.key;
    const flip = (key) => { S[key] = !S[key]; say(''); };
    if (k === 'ArrowUp') moveQuery(-1, 0);
    else if (k === 'ArrowDown') moveQuery(1, 0);
    else if (k === 'ArrowLeft') moveQuery(0, -1);
    else if (k === 'ArrowRight') moveQuery(0, 1);
    else if (k === '[' || k === ']') { S.layer = clamp(S.layer + (k === ']' ? 1 : -1), 0, view.maxL - 1); invalidate(); }
    else if (k === ',' || k === '.') { cycleHead(k === '.' ? 1 : -1); invalidate(); }
    else if (k === 'c') { if (cfgs().some((c) => c.class_token)) setQuery({ kind: 'cls' }, true); else say('no configuration has a CLS token', true); }
    else if (/^[1-9]$/.test(k)) {
      const i = +k - 1;
      if (cfgs().some((c) => c.registers > i)) setQuery({ kind: 'reg', i }, true); else say(`no configuration has a register ${i}`, true);
    } else if (k === 'n') flip('norms');
    else if (k === 'o') flip('outlines');
    else if (k === 'r') flip('rollout');
    else if (k === 'g') flip('regs');
    else if (k === '?') ui.help.hidden = !ui.help.hidden;
    else if (k === 'Escape') {
      if (!ui.help.hidden) ui.help.hidden = true;
      else if (S.pinned) { S.pinned = false; say(''); } else setQuery(NONE, false);
    } else return;
    e.preventDefault();
  });
  // Drag and drop an image file onto the page (live pages upload it).
  document.addEventListener('dragover', (e) => {
    if (!e.dataTransfer || ![...e.dataTransfer.types].includes('Files')) return;
    e.preventDefault();
    document.body.classList.add('dropping');
  });
  document.addEventListener('dragleave', (e) => { if (!e.relatedTarget) document.body.classList.remove('dropping'); });
  document.addEventListener('drop', (e) => {
    if (!e.dataTransfer || !e.dataTransfer.files.length) return;
    e.preventDefault();
    document.body.classList.remove('dropping');
    upload(e.dataTransfer.files[0]);
  });

  // ---- test hooks --------------------------------------------------------------------------------------
  window.vitregExplorer = {
    ready,
    idle: () => new Promise((res) => { idleWaiters.push(res); checkIdle(); }),
    state: () => ({ image: S.image, layer: S.layer, head: S.head, query: view ? tokenOf(0) : -1,
      tokens: cfgs().map((_, k) => tokenOf(k)), norms: S.norms, outlines: S.outlines, rollout: S.rollout, regs: S.regs, pinned: S.pinned }),
    shownRow: (k) => { const v = view && cfgs()[k] ? shown(k) : {}; return v.values ? Float32Array.from(v.values) : null; },
    cellOf: (k, r, c) => {
      const p = panels[k], cfg = cfgs()[k];
      if (!p) return null;
      // Into view, clear of the sticky header, so a click at the returned point lands on the patch.
      p.canvas.style.scrollMarginTop = `${$('header').offsetHeight + 8}px`;
      p.canvas.scrollIntoView({ block: 'nearest', inline: 'nearest' });
      const b = p.canvas.getBoundingClientRect();
      return { x: b.left + ((c + 0.5) / cfg.grid[1]) * b.width, y: b.top + ((r + 0.5) / cfg.grid[0]) * b.height };
    },
    config: (k) => {
      const c = cfgs()[k];
      if (!c) return null;
      const out = {};
      for (const [key, v] of Object.entries(c)) if (!BLOBS.includes(key)) out[key] = v;
      return out;
    },
    images: () => images.map((e) => e.name),
    timings: () => ({ decodeMs, drawMs }),
  };

  fillImages();
  const h = readHash();
  pendingHash = h;
  selectImage(h.img != null && h.img < images.length ? h.img : 0);
})();
