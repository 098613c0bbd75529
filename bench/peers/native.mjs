// Native: Kiln's kiln-generate (build/bin) vs llama.cpp's prebuilt CPU build
// through node-llama-cpp, same GGUF, same threads, greedy, same prompt and
// token count, interleaved (Kiln run, llama.cpp run, ...). Rates follow
// kiln-generate's definitions on both sides: prompt tokens / prompt eval time;
// generation = decode evals / their time (the first sampled token comes from
// the prompt's logits, so N tokens cost N-1 evals). Both sides time a prompt
// on weights already read once: llama.cpp's context lives across the runs
// (after a warmup run), and each kiln-generate process starts with
// --warmup (BOS and EOS evaluated, then the cache emptied). Without it the
// first pass over freshly repacked weights, ~0.1 s on some VMs, falls into
// Kiln's prompt time alone.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stats, interleave, emit } from './common.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function kilnRun(bin, model, prompt, n, threads, ctx, timeoutMs, isa) {
  const r = spawnSync(bin, ['-m', model, '-p', prompt, '-n', String(n), '-t', String(threads), '--ctx', String(ctx),
    '--temp', '0', '--repeat-penalty', '1', '--print-ids', '--warmup', ...(isa ? ['--isa', isa] : [])], { encoding: 'utf8', maxBuffer: 1 << 24, timeout: timeoutMs });
  if (r.error || r.signal) return { pp: null, tg: null, prompt_tokens: null, ids: [], error: r.error ? String(r.error.message) : `killed (${r.signal}) after ${timeoutMs} ms` };
  const m = /prompt (\d+) tokens, ([\d.]+) tokens\/s; generated (\d+) tokens, ([\d.]+) tokens\/s/.exec(r.stderr || '');
  if (r.status !== 0 || !m) throw new Error(`kiln-generate failed: ${r.stderr}`);
  const ids = r.stdout.trim().split(/\s+/).filter(Boolean).map(Number);
  const row = /isa (\w+)\)/.exec(r.stderr)?.[1] ?? null; // the kernel-table row kiln-generate ran
  return { pp: +m[2], tg: +m[4], prompt_tokens: +m[1], ids, isa: row };
}

// ggmlCpu: 'auto' (ggml picks the CPU variant for this machine, as a user
// gets it) or a variant name (tests/oracle/llamacpp.mjs pins it)
export async function openLlama({ ggmlCpu = 'auto' } = {}) {
  const { readGgufFileInfo } = await import('node-llama-cpp');
  const { loadOracleLlama, loadedGgmlCpuVariants } = await import('../../tests/oracle/llamacpp.mjs');
  const llama = await loadOracleLlama({ ggmlCpu });
  return { llama, readGgufFileInfo, cpuVariant: loadedGgmlCpuVariants().join(',') || null };
}

async function llamaRun(ctxObj, model, prompt, n, timeoutMs) {
  const seq = ctxObj.seq;
  await seq.clearHistory();
  const input = [model.tokens.bos, ...model.tokenize(prompt)];
  const ids = []; const times = [];
  const t0 = performance.now();
  // temperature 0 is greedy; no repeat penalty (as kiln-generate --repeat-penalty 1)
  for await (const tok of seq.evaluate(input, { temperature: 0 })) {
    times.push(performance.now()); ids.push(tok);
    if (ids.length >= n || performance.now() - t0 > timeoutMs) break; // a starved machine: keep what was measured
  }
  const pp = input.length / ((times[0] - t0) / 1e3);
  const tg = ids.length > 1 ? (ids.length - 1) / ((times[times.length - 1] - times[0]) / 1e3) : null;
  return { pp, tg, prompt_tokens: input.length, ids };
}

// A prompt of about n tokens (BOS included) for the synthetic models'
// vocabulary: a paragraph repeated, cut at n - 1 tokens of llama.cpp's
// tokenizer and detokenized (both engines then tokenize the text; the
// records give each one's count).
export async function promptOfTokens(llamaHandle, modelPath, n) {
  const base = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends, ' +
    'and every morning she asked her mother whether the sun would shine. One day a big dog ran past the swings and barked at a bird. ';
  const lm = await llamaHandle.llama.loadModel({ modelPath, useMmap: true });
  try {
    let text = base;
    while (lm.tokenize(text).length < n) text += base;
    return lm.detokenize(lm.tokenize(text).slice(0, n - 1));
  } finally { await lm.dispose(); }
}

export async function runNative({ models, threads = [1, 2], prompt, nGen = 16, reps = 3, warmup = 1, ctx = 256, bwGBs = {}, log = console.error, llamaHandle, timeoutMs = 120_000, more = () => true, isa = null, label = 'short' }) {
  const bin = path.join(root, 'build/bin/kiln-generate');
  const { llama } = llamaHandle;
  const out = [];
  for (const mdl of models) {
    const lm = await llama.loadModel({ modelPath: mdl.path, useMmap: true });
    for (const t of threads) {
      const c = await lm.createContext({ contextSize: ctx, threads: t, batchSize: ctx });
      const ctxObj = { seq: c.getSequence() };
      await llamaRun(ctxObj, lm, 'Once upon', 2, timeoutMs); // its first evals allocate; kiln-generate runs fresh each time and is timed as such
      const [ka, la] = await interleave(reps, warmup,
        () => kilnRun(bin, mdl.path, prompt, nGen, t, ctx, timeoutMs, isa),
        () => llamaRun(ctxObj, lm, prompt, nGen, timeoutMs), more);
      await c.dispose();
      // same tokens over the common length (a timed-out run stops early)
      const diffAt = (a, b) => { const n = Math.min(a.length, b.length); for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i; return -1; };
      let firstDiff = -1;
      for (let i = 0; i < ka.length && firstDiff < 0; i++) firstDiff = diffAt(ka[i].ids, la[i].ids);
      const same = firstDiff < 0 && ka.some((k) => k.ids.length > 0);
      const kt = ka.map((r) => r.tg), lt = la.map((r) => r.tg);
      const kp = ka.map((r) => r.pp), lp = la.map((r) => r.pp);
      const bw = bwGBs[t] ?? bwGBs[Math.max(...Object.keys(bwGBs).map(Number).filter((x) => x <= t))];
      const frac = (tg) => (bw && mdl.bytesPerToken ? (tg * mdl.bytesPerToken) / (bw * 1e9) : null);
      const rec = emit({
        what: 'peers_native', prompt_kind: label, model: mdl.name, threads: t, kiln_isa: ka.find((k) => k.isa)?.isa ?? null, llamacpp_cpu_variant: llamaHandle.cpuVariant, reps: ka.length, prompt_tokens: ka.find((k) => k.prompt_tokens)?.prompt_tokens ?? null, gen_tokens: nGen,
        kiln_tg: kt, llamacpp_tg: lt, kiln_pp: kp, llamacpp_pp: lp, prompt_tokens_llamacpp: la[0].prompt_tokens,
        kiln: { tg: stats(kt), pp: stats(kp) }, llamacpp: { tg: stats(lt), pp: stats(lp) },
        ratio_tg: stats(kt.map((x, i) => (x != null && lt[i] ? x / lt[i] : NaN))), ratio_pp: stats(kp.map((x, i) => (x != null && lp[i] ? x / lp[i] : NaN))),
        weight_MB_per_token: mdl.bytesPerToken / 1e6, read_bw_GBs: bw ?? null,
        kiln_bw_frac: frac(stats(kt).median), llamacpp_bw_frac: frac(stats(lt).median),
        same_tokens: same, first_diff: firstDiff, compared_tokens: Math.min(...ka.map((k, i) => Math.min(k.ids.length, la[i].ids.length))), kiln_errors: ka.map((k) => k.error).filter(Boolean), llamacpp_text: lm.detokenize(la[0].ids), kiln_ids: ka[0].ids, llamacpp_ids: la[0].ids,
      });
      log(`  native ${label} prompt ${mdl.name} t=${t} (kiln ${rec.kiln_isa}, ggml ${rec.llamacpp_cpu_variant}): tg kiln ${rec.kiln.tg.median?.toFixed(1)} vs llama.cpp ${rec.llamacpp.tg.median?.toFixed(1)} tok/s; pp ${rec.kiln.pp.median?.toFixed(1)} vs ${rec.llamacpp.pp.median?.toFixed(1)}; same tokens: ${same}`);
      out.push(rec);
    }
    await lm.dispose();
  }
  return out;
}

// llama.cpp's greedy ids and text for one model (the browser section's
// reference when the native section did not run)
export async function llamaReference({ llamaHandle, mdl, prompt, nGen, threads = 1, ctx = 256, timeoutMs = 120_000 }) {
  const lm = await llamaHandle.llama.loadModel({ modelPath: mdl.path, useMmap: true });
  try {
    const c = await lm.createContext({ contextSize: ctx, threads, batchSize: ctx });
    const r = await llamaRun({ seq: c.getSequence() }, lm, prompt, nGen, timeoutMs);
    await c.dispose();
    return { ids: r.ids, text: lm.detokenize(r.ids) };
  } finally { await lm.dispose(); }
}
