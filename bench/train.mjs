// bench/train.mjs — training throughput, images/s: the Fashion-MNIST example
// models (FC 784-500-10, small CNN), native kiln-mnist vs the npm package's
// kiln-st (and kiln-mt) in Node, one epoch over a dataset, AdamW, batch 100.
// Runs alternate native / wasm (A B A B) so a noisy machine shows in the
// min–max; the last line is one JSON object with the median ratios.
//
//   node bench/train.mjs [--data DIR] [--reps N] [--models fc,cnn] [--mt]
//
// DIR holds the four IDX files (raw or .gz for native; raw for Node):
// default tests/data/fashion-mnist (1,000 training images). Needs
// build/bin/kiln-mnist (Release) and `npm run build`.
import { spawnSync } from 'node:child_process';
import { readFileSync, existsSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, def) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };
const dataDir = path.resolve(opt('--data', path.join(root, 'tests/data/fashion-mnist')));
const reps = Number(opt('--reps', '3'));
const models = opt('--models', 'fc,cnn').split(',');
const withMt = args.includes('--mt');

const readIdx = (name, header) => {
  const p = path.join(dataDir, name);
  const buf = existsSync(p) ? readFileSync(p) : gunzipSync(readFileSync(p + '.gz'));
  return new Uint8Array(buf.subarray(header));
};
const images = readIdx('train-images-idx3-ubyte', 16);
const labels = readIdx('train-labels-idx1-ubyte', 8);
const n = labels.length;

const median = (v) => { const s = [...v].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

function native(model) {
  const r = spawnSync(path.join(root, 'build/bin/kiln-mnist'),
    ['train', '--data', dataDir, '--model', model, '--epochs', '1', '--threads', '1', '--val-split', '0', '--out', '/tmp/kiln-bench-train.gguf'],
    { encoding: 'utf8' });
  const m = /trained 1 epochs in ([\d.]+) s \((\d+) images\/s\)/.exec(r.stderr);
  if (r.status !== 0 || !m) throw new Error(`kiln-mnist failed: ${r.stderr.slice(-400)}`);
  return Number(m[2]);
}

const { Kiln } = await import(path.join(root, 'js/dist/index.js'));
const engines = { st: await Kiln.create({ build: 'st', logLevel: 'error' }) };
if (withMt) engines.mt = await Kiln.create({ build: 'mt', threads: 1, logLevel: 'error' });

async function wasm(kiln, model) {
  const t0 = performance.now();
  const m = await kiln.train({ model, images, labels, epochs: 1, batchSize: 100, learningRate: 1e-3, seed: 1 });
  const dt = (performance.now() - t0) / 1000;
  m.free();
  return n / dt;
}

const out = {};
for (const model of models) {
  const rows = { native: [], st: [], mt: [] };
  await wasm(engines.st, model); // warm-up: compile, first allocations
  for (let r = 0; r < reps; r++) {
    rows.native.push(native(model));
    rows.st.push(await wasm(engines.st, model));
    if (engines.mt) rows.mt.push(await wasm(engines.mt, model));
  }
  for (const k of Object.keys(rows)) {
    if (!rows[k].length) continue;
    console.log(JSON.stringify({ what: 'train', model, engine: k, threads: 1, images: n,
      images_per_s: Math.round(median(rows[k])), min: Math.round(Math.min(...rows[k])), max: Math.round(Math.max(...rows[k])) }));
  }
  const ratios = rows.st.map((v, i) => v / rows.native[i]);
  out[`${model}_wasm_st_vs_native`] = Number(median(ratios).toFixed(3));
}
for (const k of Object.values(engines)) k.destroy();
console.log(JSON.stringify(out));
