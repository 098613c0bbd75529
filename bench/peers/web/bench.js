// Runs in Chromium: one engine per page, one GGUF, loaded once; runs are
// asked for one at a time so that the driver (browser.mjs) can alternate
// engines between runs.
//   window.__peers.open({engine: 'kiln'|'wllama', url, threads, build, ctx, warmup, wasmUrl?}) -> {loadMs, info}
//     (wasmUrl: another directory of Kiln's wasm builds, laid out as wasm/dist/, for A/B runs)
//   window.__peers.gen({prompt, nGen, reps}) -> {reps: [{pp, tg, text, tokens?, ...}]}
//   window.__peers.first({prompt}) -> {ms, pp, prompt_n}: time to first token, the wall time
//     of a one-token greedy completion of the prompt (its whole prompt evaluated, one token sampled)
//   window.__peers.close()
// Rates use one definition on both sides: pp = prompt tokens / prompt time;
// tg = decode evals / their time, where N generated tokens cost N-1 evals
// (the first comes from the prompt's logits). Both engines time generation
// from the first sampled token to the last, so tg = (N-1) / that time.
// warmup: a tiny generation right after loading, so V8 has tiered the hot
// wasm functions up before anything is timed.
import { Wllama } from '/node_modules/@wllama/wllama/esm/index.js';

const WARM_PROMPT = 'Once upon';
const WARM_TOKENS = 3;

async function fetchBlob(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.blob();
}

function wllamaEngine() {
  let w = null;
  return {
    async open({ url, threads, ctx, warmup }) {
      w = new Wllama({ default: '/node_modules/@wllama/wllama/esm/wasm/wllama.wasm' }, { suppressNativeLog: true, logger: { debug() {}, log() {}, warn: console.warn, error: console.error } });
      const t0 = performance.now();
      const blob = await fetchBlob(url);
      await w.loadModel([blob], { n_threads: threads, n_ctx: ctx, n_batch: ctx, n_gpu_layers: 0 });
      const loadMs = performance.now() - t0;
      for (let i = 0; i < warmup; i++) await w.createCompletion({ prompt: WARM_PROMPT, max_tokens: WARM_TOKENS, temperature: 0, cache_prompt: false });
      return { loadMs, info: { engine: 'wllama', multiThread: w.isMultithread?.() ?? null, threads, crossOriginIsolated } };
    },
    async gen({ prompt, nGen, reps }) {
      const out = [];
      for (let i = 0; i < reps; i++) {
        const r = await w.createCompletion({ prompt, max_tokens: nGen, temperature: 0, cache_prompt: false });
        const t = r.timings ?? {};
        const n = t.predicted_n ?? 0;
        out.push({
          pp: t.prompt_per_second, tg: n > 1 && t.predicted_ms > 0 ? (n - 1) / (t.predicted_ms / 1e3) : null,
          tg_reported: t.predicted_per_second, prompt_n: t.prompt_n, predicted_n: n, text: r.choices?.[0]?.text ?? '',
        });
      }
      return { reps: out };
    },
    async first({ prompt }) {
      const t0 = performance.now();
      const r = await w.createCompletion({ prompt, max_tokens: 1, temperature: 0, cache_prompt: false });
      const ms = performance.now() - t0;
      return { ms, pp: r.timings?.prompt_per_second ?? null, prompt_n: r.timings?.prompt_n ?? null };
    },
    async close() { await w?.exit(); w = null; },
  };
}

function kilnEngine() {
  let k = null, model = null;
  const greedy = { temperature: 0, repeatPenalty: 1 };
  return {
    async open({ url, threads, build, simd, ctx, warmup, wasmUrl }) {
      const { Kiln } = await import('/js/dist/index.js');
      k = await Kiln.create({ threads, build, simd: simd ?? 'auto', wasmUrl: wasmUrl ?? '/wasm/dist/' });
      const t0 = performance.now();
      model = await k.loadModel(url, { nCtx: ctx });
      const loadMs = performance.now() - t0;
      for (let i = 0; i < warmup; i++) await model.complete(WARM_PROMPT, { maxTokens: WARM_TOKENS, ...greedy });
      return { loadMs, info: { engine: 'kiln', ...k.info(), ops: undefined, crossOriginIsolated } };
    },
    async gen({ prompt, nGen, reps }) {
      const out = [];
      for (let i = 0; i < reps; i++) {
        const r = await model.complete(prompt, { maxTokens: nGen, ...greedy, cachePrompt: false }); // every rep evaluates the whole prompt
        const s = r.stats;
        const n = s.generatedTokens; // tokensPerSecond = n / (time of n samplings and n-1 evals)
        const genS = s.tokensPerSecond > 0 ? n / s.tokensPerSecond : 0;
        out.push({
          pp: s.promptTokensPerSecond, tg: n > 1 && genS > 0 ? (n - 1) / genS : null, tg_reported: s.tokensPerSecond,
          prompt_n: s.promptTokens, predicted_n: n, text: r.text, tokens: r.tokens, stopReason: r.stopReason,
        });
      }
      return { reps: out };
    },
    async first({ prompt }) {
      const t0 = performance.now();
      const r = await model.complete(prompt, { maxTokens: 1, ...greedy, cachePrompt: false });
      const ms = performance.now() - t0;
      return { ms, pp: r.stats.promptTokensPerSecond, prompt_n: r.stats.promptTokens };
    },
    async close() { model?.free(); k?.destroy(); model = null; k = null; },
  };
}

let engine = null;
window.__peers = {
  ready: true,
  async open(o) { engine = o.engine === 'kiln' ? kilnEngine() : wllamaEngine(); return engine.open(o); },
  gen: (o) => engine.gen(o),
  first: (o) => engine.first(o),
  close: () => engine?.close(),
};
