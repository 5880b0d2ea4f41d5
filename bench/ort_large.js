// usage: ORT_HOME=DIR node ort_large.js MODEL.onnx SIZE THREADS WARMUP
// One timed forward of a random SIZE×SIZE image (batch 1) after WARMUP untimed ones; prints
// "onnxruntime: <ms> ms/image". For bench/dense_large.sh, which measures its peak RSS.
const path = require('path');
const ort = require(path.join(process.env.ORT_HOME || '.', 'node_modules', 'onnxruntime-node'));
(async () => {
  const [model, size, threads = '2', warmup = '0'] = process.argv.slice(2);
  const s = await ort.InferenceSession.create(model, { intraOpNumThreads: +threads, interOpNumThreads: 1, graphOptimizationLevel: 'all' });
  const n = 3 * +size * +size;
  const x = new ort.Tensor('float32', Float32Array.from({ length: n }, () => Math.random() * 2 - 1), [1, 3, +size, +size]);
  for (let i = 0; i < +warmup; i++) await s.run({ pixel_values: x });
  const t = process.hrtime.bigint();
  await s.run({ pixel_values: x });
  console.log(`onnxruntime: ${(Number(process.hrtime.bigint() - t) / 1e6).toFixed(1)} ms/image`);
})().catch((e) => { console.error(`onnxruntime: ${e.message}`); process.exit(2); });
