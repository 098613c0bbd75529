// bench/generate-wasm.mjs — bench-generate's wasm side: prompt
// processing and generation tokens/s of the npm package in Node, kiln-st
// (1 thread) and kiln-mt (N threads), one JSON object per line with
// bench-generate's fields (plus "build" and "engine":"wasm").
//
//   node bench/generate-wasm.mjs [-m FILE]... [--builds st,mt] [--threads N (mt, default 2)]
//        [--prompt N (64)] [--gen N (32)] [--reps N (3)] [--warmup N (0)] [--nctx N]
//
// Defaults: models/stories260K.gguf plus bench/peers/data/synth-{q4_0,q8_0}.gguf
// when present (bash bench/peers/make-models.sh builds them). As in
// bench-generate the prompt is fixed ids (BOS, then 300 + (i*37) % 200) and
// generation is greedy; the rate is the decode evals' rate: --gen N asks for
// N+1 tokens (the first comes from the prompt's logits), so N evals are timed.
// A benchmark, not a test: run by hand (npm run bench:generate).
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(`--${k}`); return i >= 0 ? args[i + 1] : d; };
const files = args.flatMap((a, i) => (a === '-m' ? [args[i + 1]] : []));
if (!files.length) {
  files.push(path.join(root, 'models/stories260K.gguf'));
  for (const t of ['q4_0', 'q8_0']) { const f = path.join(root, `bench/peers/data/synth-${t}.gguf`); if (existsSync(f)) files.push(f); }
}
const builds = opt('builds', 'st,mt').split(',');
const mtThreads = +opt('threads', 2);
const nPrompt = +opt('prompt', 64);
const nGen = +opt('gen', 32);
const reps = Math.max(1, +opt('reps', 3));
const warmup = +opt('warmup', 0);
const nCtx = +opt('nctx', 0) || Math.max(128, nPrompt + nGen + 8);

const { Kiln } = await import(path.join(root, 'js/dist/index.js'));
const q = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(s.length * p))]; };
const r1 = (x) => Math.round(x * 10) / 10;
const r2 = (x) => Math.round(x * 100) / 100;
const ids = Array.from({ length: nPrompt }, (_, i) => (i === 0 ? 1 : 300 + ((i * 37) % 200)));

// bytes a generated token streams: every tensor but the embedding table
async function weightBytes(model) {
  let b = 0;
  for (const n of model.tensorNames) {
    if (n === 'token_embd.weight') continue;
    const t = model.tensor(n);
    b += (await t.info()).nbytes;
    t.free();
  }
  return b;
}

for (const file of files) {
  const name = path.relative(root, file).startsWith('..') ? file : path.relative(root, file);
  for (const build of builds) {
    const threads = build === 'st' ? 1 : mtThreads;
    let kiln = null;
    try {
      kiln = await Kiln.create({ build, threads });
      const model = await kiln.loadModel(file, { nCtx });
      const wbytes = await weightBytes(model);
      const pp = [], tg = [], tgc = [];
      let genTokens = null;
      for (let r = 0; r < warmup + reps; r++) {
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        const c = await model.complete(ids, { maxTokens: nGen + 1, temperature: 0, repeatPenalty: 1, cachePrompt: false });
        const wall = (performance.now() - t0) / 1e3;
        const cpu = (() => { const u = process.cpuUsage(c0); return (u.user + u.system) / 1e6; })();
        const s = c.stats;
        const evals = s.generatedTokens - (c.stopReason === 'eos' ? 0 : 1);
        const genS = s.tokensPerSecond > 0 ? s.generatedTokens / s.tokensPerSecond : NaN;
        if (r < warmup) continue;
        genTokens = evals;
        pp.push(s.promptTokensPerSecond);
        tg.push(evals / genS);
        // process CPU seconds (all threads) spent while generating: the call's CPU time, the
        // prompt's share taken out in proportion to wall time (the engine is busy throughout)
        tgc.push(evals / Math.max(1e-9, (cpu * genS) / wall));
      }
      model.free();
      const info = kiln.info();
      console.log(JSON.stringify({
        what: 'generate', engine: 'wasm', build: `kiln-${build}`, model: name, isa: info.isa, simd: info.simd, threads: info.threads,
        prompt_tokens: nPrompt, gen_tokens: genTokens,
        pp_tokens_per_s: r1(q(pp, 0.5)), tg_tokens_per_s: r1(q(tg, 0.5)), pp_p25: r1(q(pp, 0.25)), pp_p75: r1(q(pp, 0.75)),
        tg_p25: r1(q(tg, 0.25)), tg_p75: r1(q(tg, 0.75)), weight_MB_per_token: r1(wbytes / 1e6), tg_GBps: r2((wbytes * q(tg, 0.5)) / 1e9),
        tg_tokens_per_cpu_s: r1(q(tgc, 0.5)), tg_GBps_cpu: r2((wbytes * q(tgc, 0.5)) / 1e9), reps, node: process.version, cores: os.availableParallelism?.() ?? os.cpus().length,
      }));
    } catch (e) {
      console.log(JSON.stringify({ what: 'generate', engine: 'wasm', build: `kiln-${build}`, model: name, threads, error: String(e?.message ?? e) }));
    } finally {
      kiln?.destroy();
    }
  }
}
