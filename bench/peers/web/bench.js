// Runs in Chromium: one engine's generation on one GGUF, timings per rep.
// window.__peers.wllama(opts) / window.__peers.kiln(opts) -> {reps:[{pp, tg, text}], ...}
import { Wllama } from '/node_modules/@wllama/wllama/esm/index.js';

async function fetchBlob(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.blob();
}

async function wllama({ url, threads, prompt, nGen, reps, warmup, ctx }) {
  const w = new Wllama({ default: '/node_modules/@wllama/wllama/esm/wasm/wllama.wasm' }, { suppressNativeLog: true, logger: { debug() {}, log() {}, warn: console.warn, error: console.error } });
  const blob = await fetchBlob(url);
  const t0 = performance.now();
  await w.loadModel([blob], { n_threads: threads, n_ctx: ctx, n_batch: ctx, n_gpu_layers: 0 });
  const loadMs = performance.now() - t0;
  const out = [];
  for (let i = 0; i < warmup + reps; i++) {
    const r = await w.createCompletion({ prompt, max_tokens: nGen, temperature: 0, cache_prompt: false });
    const t = r.timings ?? {};
    if (i >= warmup) out.push({ pp: t.prompt_per_second, tg: t.predicted_per_second, prompt_n: t.prompt_n, predicted_n: t.predicted_n, text: r.choices?.[0]?.text ?? '' });
  }
  const info = { multiThread: w.isMultithread?.() ?? null, threads, crossOriginIsolated };
  await w.exit();
  return { reps: out, loadMs, info };
}

async function kiln({ url, threads, build, prompt, nGen, reps, warmup, ctx }) {
  const mod = await import('/js/dist/index.js');
  const k = await mod.Kiln.create({ threads, build, wasmUrl: '/wasm/dist/' });
  const model = await k.loadModel(url);
  if (typeof model.generate !== 'function') { k.destroy(); return { pending: 'model.generate is not in the JS package yet' }; }
  const out = [];
  for (let i = 0; i < warmup + reps; i++) {
    const r = await model.generate(prompt, { maxTokens: nGen, temperature: 0, ctx });
    if (i >= warmup) out.push({ pp: r.stats?.promptTokensPerSecond, tg: r.stats?.tokensPerSecond, text: r.text });
  }
  model.free(); k.destroy();
  return { reps: out, info: k.info?.() };
}

window.__peers = { wllama, kiln, ready: true };
