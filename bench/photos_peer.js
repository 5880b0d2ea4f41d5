// The model half of the peer pipeline: reads the float32 batches bench/photos_peer.py writes to
// stdin and runs each through ONNX Runtime (CPU, fp32), timing the folder end to end.
//
// usage: bench/photos_peer.py FOLDER | ORT_HOME=DIR node bench/photos_peer.js MODEL.onnx [--threads N] [--save FILE]
//   ORT_HOME: the folder whose node_modules holds onnxruntime-node (npm install --ignore-scripts
//   onnxruntime-node@1.30.0); default the current folder.
//   --threads: ORT intra-op threads (default: the number of cores); inter-op 1, all graph optimizations.
//   --save FILE: also write the CLS output rows as raw float32 [images, D] (for the sanity check).
// Prints one line: "photos_peer: K images in S s = R images/s (ORT session ready at X s, first
// batch at Y s)", where the clock starts when this process starts — in a shell pipeline, the moment
// the Python side starts too — and stops when the last batch's output is back.
'use strict';
const t0 = process.hrtime.bigint();
const secs = () => Number(process.hrtime.bigint() - t0) / 1e9;
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require(path.join(process.env.ORT_HOME || '.', 'node_modules', 'onnxruntime-node'));

const args = process.argv.slice(2);
const model = args.find((a, i) => !a.startsWith('--') && (i === 0 || !args[i - 1].startsWith('--')));
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
if (!model) { console.error('usage: photos_peer.js MODEL.onnx [--threads N] [--save FILE] < batches'); process.exit(2); }
const threads = +opt('--threads', os.cpus().length);
const save = opt('--save', '');

// stdin as an async byte reader: read(n) resolves with exactly n bytes (or fewer at the end)
function reader(stream) {
  const chunks = []; let have = 0; let ended = false; let wake = null;
  stream.on('data', (c) => { chunks.push(c); have += c.length; if (wake) { wake(); wake = null; } });
  stream.on('end', () => { ended = true; if (wake) { wake(); wake = null; } });
  return async function read(n, into) {
    while (have < n && !ended) await new Promise((r) => { wake = r; });
    const m = Math.min(n, have);
    const dst = into || Buffer.allocUnsafe(m);
    let off = 0;
    while (off < m) {
      const c = chunks[0]; const k = Math.min(c.length, m - off);
      c.copy(dst, off, 0, k); off += k;
      if (k === c.length) chunks.shift(); else chunks[0] = c.subarray(k);
    }
    have -= m;
    return m;
  };
}

(async () => {
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
  });
  const tReady = secs();
  const read = reader(process.stdin);
  const head = Buffer.alloc(20);
  let images = 0; let tFirst = 0; const rows = [];
  for (;;) {
    if ((await read(20, head)) < 20) throw new Error('photos_peer.js: stream ended without its end marker');
    if (head.toString('latin1', 0, 4) !== 'VTRB') throw new Error('photos_peer.js: bad batch header');
    const [n, c, h, w] = [0, 1, 2, 3].map((k) => head.readInt32LE(4 + 4 * k));
    if (n === 0) break;
    const data = new Float32Array(n * c * h * w);
    const bytes = Buffer.from(data.buffer);
    if ((await read(bytes.length, bytes)) < bytes.length) throw new Error('photos_peer.js: truncated batch');
    if (!tFirst) tFirst = secs();
    const out = await session.run({ pixel_values: new ort.Tensor('float32', data, [n, c, h, w]) });
    if (save) rows.push(Buffer.from(out.cls.data.buffer, out.cls.data.byteOffset, out.cls.data.byteLength));
    images += n;
  }
  const t = secs();
  if (save) fs.writeFileSync(save, Buffer.concat(rows));
  console.log(`photos_peer: ${images} images in ${t.toFixed(3)} s = ${(images / t).toFixed(2)} images/s ` +
    `(ORT ${threads} threads; session ready at ${tReady.toFixed(2)} s, first batch at ${tFirst.toFixed(2)} s)`);
})().catch((e) => { console.error(e.message || e); process.exit(1); });
