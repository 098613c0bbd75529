// Runs in Chromium, driven by bench/vad-chromium.mjs: Silero VAD over the same
// samples with Kiln's npm package (kiln.loadVad + vad.detect, build 'st', one
// thread, its engine in a worker) and with onnxruntime-web's wasm backend
// (numThreads 1, SIMD, on the page's thread) on Silero's ONNX export.
// Each timed call is one pass over the whole recording; the driver calls
// the engines in turn so that compared passes run next to each other.
//   window.__vad.open({seconds, simd, warmS, ggml, onnx, wav}) -> {windows, info}
//   window.__vad.kiln() / window.__vad.ort() -> {ms, windows, speech_windows}
//   window.__vad.close()
import * as ort from '/node_modules/onnxruntime-web/dist/ort.wasm.min.mjs';
import { tileWav, ortPass } from './silero.js';

const RATE = 16000;
let x = null, kiln = null, vad = null, session = null;

async function bytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

const ortPassX = (len) => ortPass(ort, session, x, len);

async function kilnPass(len) {
  const probs = (await vad.detect(x.slice(0, len), RATE)).probs;
  let speech = 0;
  for (const p of probs) speech += p >= 0.5;
  return { speech_windows: speech, windows: probs.length };
}

window.__vad = {
  async open({ seconds, simd, warmS, ggml, onnx, wav }) {
    x = tileWav(await bytes(wav), seconds * RATE);
    const { Kiln } = await import('/js/dist/index.js');
    kiln = await Kiln.create({ threads: 1, build: 'st', simd, wasmUrl: '/wasm/dist/' });
    vad = await kiln.loadVad(await bytes(ggml));
    ort.env.wasm.numThreads = 1;
    ort.env.wasm.proxy = false;
    ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
    session = await ort.InferenceSession.create(await bytes(onnx), { executionProviders: ['wasm'] });
    // untimed passes through each, so that V8 has tiered the hot wasm
    // functions up (TurboFan) before anything is timed: a few short ones,
    // then one over the whole recording (the first pass at full length ran
    // 3x slower than the later ones when only the short ones preceded it)
    for (let i = 0; i < 3; i++) { await kilnPass(warmS * RATE); await ortPassX(warmS * RATE); }
    await kilnPass(x.length); await ortPassX(x.length);
    const info = kiln.info();
    return { info: { build: info.build, simd: info.simdFlavor, isa: info.isa, threads: info.threads, ort_version: ort.env.versions?.web ?? null, crossOriginIsolated } };
  },
  async kiln() { const t0 = performance.now(); const r = await kilnPass(x.length); return { ms: performance.now() - t0, ...r }; },
  async ort() { const t0 = performance.now(); const r = await ortPassX(x.length); return { ms: performance.now() - t0, ...r }; },
  async close() { vad?.free(); kiln?.destroy(); await session?.release?.(); },
};
window.__vad.ready = true;
