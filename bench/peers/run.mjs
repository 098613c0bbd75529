// npm run bench:peers — Kiln beside the libraries users would pick instead,
// on this machine, same files and threads, in one run (issue 9):
//   kernels  Kiln wasm (kiln-st) vs @tensorflow/tfjs-backend-wasm, Node, 1 thread
//   bw       read bandwidth (bench-kernels' measurement), 1 and 2 threads
//   native   kiln-generate vs llama.cpp (node-llama-cpp's prebuilt CPU build)
//   browser  Chromium: Kiln's npm package (kiln-mt, kiln-st) vs @wllama/wllama
// Prints a table; JSON lines go to stdout's end and to --json FILE
// (default build/peers.jsonl). The last line is the summary object.
// A benchmark, not a test: run by hand, never from scripts/test.sh.
//
//   node bench/peers/run.mjs [--only kernels,bw,native,browser] [--models stories,q4_0,q8_0,q4_k_m,q5_k_m]
//        [--long N (native: a second prompt of ~N tokens, default 512, 0: none)]
//        [--threads 1,2] [--gen N] [--prompt TEXT] [--reps N] [--warmup N] [--rounds N] [--browser-reps N]
//        [--engines wllama,kiln-mt,wllama-1t,kiln-st] [--kernel-reps N] [--budget S]
//        [--timeout S (one run's limit; a starved machine records what it measured)] [--json FILE]
//        [--long-tokens N (512; 0: no long-prompt rows)] [--long-models q4_0] [--long-chat 0 (no chat-prompt first token)]
// --budget (default 540 s): extra native reps and browser rounds beyond the
// first are skipped when they would not fit, so the default run ends within
// ~10 minutes on a shared 2-core machine; the output says what was cut.
// Longer runs: e.g. --budget 3600 --reps 5 --rounds 5 --gen 32.
// Needs: build/bin/{kiln-generate,bench-kernels} (Release), wasm/dist + js/dist
// (npm run build), and for the synthetic models bench/peers/make-models.sh.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setJsonFile, table, range, fmt, stats, budget } from './common.mjs';
import { findModels, weightBytesPerToken } from './models.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(`--${k}`); return i >= 0 ? args[i + 1] : d; };
// every option takes a value; --help prints the usage above; anything else
// stops the run before it starts (a mistyped option would otherwise be ignored)
const OPTIONS = ['only', 'models', 'long', 'threads', 'gen', 'prompt', 'reps', 'warmup', 'native-warmup', 'rounds', 'browser-reps',
  'engines', 'kernel-reps', 'budget', 'timeout', 'json', 'long-tokens', 'long-models', 'long-chat', 'isa', 'ggml-cpu'];
{
  const usage = () => {
    const src = readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n');
    return src.slice(0, src.findIndex((l) => !l.startsWith('//'))).map((l) => l.replace(/^\/\/ ?/, '')).join('\n') +
      '\n  --isa ROW (kiln-generate --isa), --ggml-cpu VARIANT (llama.cpp\'s CPU variant, e.g. haswell), --native-warmup N\n';
  };
  if (args.includes('--help') || args.includes('-h')) { process.stdout.write(usage()); process.exit(0); }
  for (let i = 0; i < args.length; i += 2) {
    const k = args[i].startsWith('--') ? args[i].slice(2) : null;
    if (!k || !OPTIONS.includes(k) || i + 1 >= args.length) {
      console.error(`bench/peers/run.mjs: ${k && OPTIONS.includes(k) ? `--${k} needs a value` : `unknown argument '${args[i]}'`} (--help lists the options)`);
      process.exit(2);
    }
  }
}
const only = opt('only', 'kernels,bw,native,browser').split(',');
const which = opt('models', 'stories,q4_0,q8_0,q4_k_m').split(',');
const longN = +opt('long', 512);
const threads = opt('threads', '1,2').split(',').map(Number);
const nGen = +opt('gen', 12);
const reps = +opt('reps', 2);
const rounds = +opt('rounds', 2);
const browserReps = +opt('browser-reps', 1);
const browserEngines = opt('engines', null)?.split(',') ?? null;
const kernelReps = +opt('kernel-reps', 3);
const warmup = +opt('warmup', 1);
const nativeWarmup = +opt('native-warmup', 0);
const timeoutS = +opt('timeout', 120);
const jsonFile = opt('json', path.join(root, 'build/peers.jsonl'));
const PROMPT = opt('prompt', 'Once upon a time, there was a little girl named Lily. She loved to play outside.');
// the long prompts of the browser section (--long-tokens 0: none): a story of
// about that many tokens (~4.2 characters a token on the synthetic models'
// llama vocabulary; the tables print the count each engine saw), plain and
// as a one-message ChatML chat (the synthetic models have no template)
const longTokens = +opt('long-tokens', 512);
const longModels = opt('long-models', 'q4_0').split(',');
const STORY = ['Once upon a time, there was a little girl named Lily.', 'She loved to play outside in the big green park near her house.',
  'One day she found a small red ball under a tree.', 'She asked her mom if she could keep it, and her mom said yes.',
  'Lily played with the ball every day with her friend Tom.', 'They threw it high in the sky and laughed when it came down.',
  'When the sun went down, they went home for dinner and told their parents about the game.'];
const storyOf = (chars) => { let t = ''; for (let i = 0; t.length < chars; i++) t += (t ? ' ' : '') + STORY[i % STORY.length]; return t; };
const LONG_PROMPT = longTokens > 0 ? storyOf(Math.round(longTokens * 4.2)) : null;
const longChat = opt('long-chat', '1') !== '0'; // --long-chat 0: the long story only, no chat-prompt first token
const CHAT_PROMPT = longTokens > 0 && longChat ? `<|im_start|>user\nRead this story and say what Lily found.\n\n${storyOf(Math.round((longTokens - 20) * 4.2))}<|im_end|>\n<|im_start|>assistant\n` : null;
const B = budget(+opt('budget', 540));
const kilnIsa = opt('isa', null);          // kiln-generate --isa (default: the best row the CPU has)
const ggmlCpu = opt('ggml-cpu', 'auto');   // llama.cpp's CPU variant (default: ggml's choice)
mkdirSync(path.dirname(jsonFile), { recursive: true });
writeFileSync(jsonFile, '');
setJsonFile(jsonFile);
const log = (...a) => console.error(...a);
const t0 = Date.now();

const summary = {
  gen_vs_wllama_q4_0: null, gen_vs_wllama_q8_0: null, gen_vs_wllama_q4_k_m: null,
  pp512_vs_wllama_q4_0: null, ttft_chat512_s_kiln_mt_q4_0: null, ttft_chat512_vs_wllama_q4_0: null,
  bw_browser_q4_0: null, bw_browser_q8_0: null,
  gen_native_vs_llamacpp_q4_0: null, gemm_vs_tfjs: null, gemm_sum_vs_tfjs: null,
  pp_native_vs_llamacpp_q4_0: null, pp_native_vs_llamacpp_q4_k_m: null, gen_native_vs_llamacpp_q4_k_m: null,
  pp_native_vs_llamacpp_q5_k_m: null,
};
const sections = [];
const notes = [];

let llamaHandle = null, readGguf = null;
const needLlama = only.includes('native') || only.includes('browser');
if (needLlama) {
  const { openLlama } = await import('./native.mjs');
  llamaHandle = await openLlama({ ggmlCpu }); readGguf = llamaHandle.readGgufFileInfo;
}
const models = findModels(root, which);
for (const m of models) m.bytesPerToken = readGguf ? await weightBytesPerToken(readGguf, m.path) : null;
const missing = which.filter((k) => !models.some((m) => m.key === k));
if (missing.length) notes.push(`models not found (run bench/peers/make-models.sh): ${missing.join(', ')}`);

let bw = {};
if (only.includes('bw') || only.includes('native') || only.includes('browser')) {
  const { runBandwidth } = await import('./bandwidth.mjs');
  log('read bandwidth (bench-kernels)...');
  bw = await runBandwidth();
  sections.push('Read bandwidth (bench-kernels, f32 sum over 3 x 64 MB): ' + Object.entries(bw).map(([t, g]) => `${t} thread${t > 1 ? 's' : ''} ${g} GB/s`).join(', '));
}

if (only.includes('kernels')) {
  log('kernels (Node, 1 thread)...');
  const { runKernels } = await import('./kernels.mjs');
  try {
    const ks = await runKernels({ reps: kernelReps, warmup, log });
    const two = ks.some((k) => k.kiln_simd128);
    sections.push(`Kernels, Node, 1 thread: Kiln ${ks[0]?.kiln_build ?? 'kiln-st'}${two ? ' and kiln-st (SIMD128)' : ''} (npm package) vs tfjs-backend-wasm (SIMD), GFLOPS, median (min–max)\n` +
      table(ks.map((k) => [k.case, k.shape, range(k.kiln), ...(two ? [range(k.kiln_simd128)] : []), range(k.tfjs), range(k.ratio), ...(two ? [range(k.ratio_simd128)] : []), k.agree ? 'yes' : 'NO']),
        ['case', 'shape', `${ks[0]?.kiln_build ?? 'kiln'} GFLOPS`, ...(two ? ['kiln-st GFLOPS'] : []), 'tfjs GFLOPS', 'kiln/tfjs', ...(two ? ['kiln-st/tfjs'] : []), 'same result']));
    summary.gemm_vs_tfjs = ks.find((k) => k.case === 'gemm_f32')?.ratio.median ?? null;
    summary.gemm_sum_vs_tfjs = ks.find((k) => k.case === 'gemm_f32_sum')?.ratio.median ?? null;
  } catch (e) { notes.push(`kernels failed: ${e.message}`); log(e); }
}

const nativeRef = {};
if (only.includes('native')) {
  log('native (kiln-generate vs llama.cpp)...');
  const { runNative, promptOfTokens } = await import('./native.mjs');
  const ns = await runNative({ models, threads, prompt: PROMPT, nGen, reps, warmup: nativeWarmup, bwGBs: bw, log, llamaHandle, timeoutMs: timeoutS * 1000, isa: kilnIsa, more: () => B.untilS(only.includes('browser') ? 0.4 : 0.95) > 0 });
  const cut = ns.filter((n) => n.reps < reps);
  if (cut.length) notes.push(`native: fewer reps than asked (time budget) for ${cut.map((n) => `${n.model}/${n.threads}t: ${n.reps}`).join(', ')}`);
  for (const n of ns) if (!nativeRef[n.model]) nativeRef[n.model] = { ids: n.llamacpp_ids, text: n.llamacpp_text };
  sections.push(`Native, greedy, ${nGen} tokens, prompt ${ns[0]?.prompt_tokens ?? '?'} tokens; Kiln kernel row ${[...new Set(ns.map((n) => n.kiln_isa))].join(',')}, llama.cpp ggml CPU variant ${llamaHandle.cpuVariant}; tokens/s median (min–max); bw = generation's fraction of the read bandwidth\n` + table(ns.map((n) => [
    n.model, n.threads, range(n.kiln.pp, 1), range(n.llamacpp.pp, 1), range(n.ratio_pp), range(n.kiln.tg, 2), range(n.llamacpp.tg, 2), range(n.ratio_tg),
    n.kiln_bw_frac == null ? '—' : `${(100 * n.kiln_bw_frac).toFixed(0)}% / ${(100 * n.llamacpp_bw_frac).toFixed(0)}%`, n.same_tokens ? 'yes' : `NO (from ${n.first_diff})`]),
  ['model', 'thr', 'pp kiln', 'pp llama.cpp', 'pp ratio', 'tg kiln', 'tg llama.cpp', 'tg ratio', 'bw kiln/llama', 'same tokens']));
  const atMax = (rows, name) => { const r = rows.filter((n) => n.model === name); return r.find((n) => n.threads === Math.max(...threads)) ?? r[0]; };
  summary.gen_native_vs_llamacpp_q4_0 = atMax(ns, 'synth-q4_0')?.ratio_tg.median ?? null;
  summary.gen_native_vs_llamacpp_q4_k_m = atMax(ns, 'synth-q4_K_M')?.ratio_tg.median ?? null;
  const km = models.find((m) => m.key === 'q4_k_m');
  if (km && readGguf) {
    const info = await readGguf(km.path, { readTensorInfo: true });
    const kinds = new Set((info.fullTensorInfo ?? info.tensorInfo ?? []).filter((t) => t.dimensions.length > 1).map((t) => t.ggmlType));
    if (kinds.size === 1 && kinds.has(12)) notes.push('synth-q4_K_M.gguf is plain Q4_K (every matrix; kiln-quantize had no Q4_K_M mix when it was made): the q4_k_m keys measure Q4_K');
  }
  // prompt processing on a long prompt (a pasted document, a chat history)
  const longModels = models.filter((m) => m.key !== 'stories');
  if (longN > 0 && longModels.length) {
    const longPrompt = await promptOfTokens(llamaHandle, longModels[0].path, longN);
    log(`native, ~${longN}-token prompt...`);
    const nl = await runNative({ models: longModels, threads, prompt: longPrompt, nGen: 2, reps, warmup: nativeWarmup, ctx: longN + 64, bwGBs: bw, log, llamaHandle, timeoutMs: timeoutS * 1000, isa: kilnIsa, label: `${longN}`, more: () => B.untilS(only.includes('browser') ? 0.5 : 0.97) > 0 });
    sections.push(`Native, prompt of ${nl[0]?.prompt_tokens ?? '?'} tokens (llama.cpp: ${nl[0]?.prompt_tokens_llamacpp ?? '?'}), 2 tokens generated; prompt tokens/s median (min–max)\n` + table(nl.map((n) => [
      n.model, n.threads, range(n.kiln.pp, 1), range(n.llamacpp.pp, 1), range(n.ratio_pp), n.same_tokens ? 'yes' : `NO (from ${n.first_diff})`]),
    ['model', 'thr', 'pp kiln', 'pp llama.cpp', 'pp ratio', 'same tokens']));
    summary.pp_native_vs_llamacpp_q4_0 = atMax(nl, 'synth-q4_0')?.ratio_pp.median ?? null;
    summary.pp_native_vs_llamacpp_q4_k_m = atMax(nl, 'synth-q4_K_M')?.ratio_pp.median ?? null;
    summary.pp_native_vs_llamacpp_q5_k_m = atMax(nl, 'synth-q5_K_M')?.ratio_pp.median ?? null;
  }
}

if (only.includes('browser')) {
  log('browser (Chromium: kiln vs wllama)...');
  const { runBrowser } = await import('./browser.mjs');
  const { llamaReference } = await import('./native.mjs');
  const t = Math.max(...threads);
  const reference = {};
  for (const m of models) {
    if (nativeRef[m.name]) { reference[m.name] = nativeRef[m.name]; continue; }
    try { reference[m.name] = await llamaReference({ llamaHandle, mdl: m, prompt: PROMPT, nGen, threads: 1 }); } catch (e) { notes.push(`llama.cpp reference for ${m.name} failed: ${e.message}`); }
  }
  const bs = await runBrowser({ models, threads: t, prompt: PROMPT, nGen, rounds, reps: browserReps, bwGBs: bw, reference, log, timeoutMs: 2 * timeoutS * 1000, warmup, engines: browserEngines, leftS: () => B.leftS() - 10,
    ctx: longTokens > 0 ? Math.max(256, longTokens + 128) : 256, longPrompt: LONG_PROMPT, chatPrompt: CHAT_PROMPT, longModels });
  for (const b of bs) if (b.rounds < rounds) notes.push(`browser ${b.model}: ${b.rounds} of ${rounds} rounds (time budget)`);
  const rows = [];
  const yn = (x) => (x == null ? '—' : x ? 'yes' : 'NO');
  for (const b of bs) for (const [name, e] of Object.entries(b.engines)) {
    const ratio = name === 'kiln-mt' ? b.ratio_kiln_mt_vs_wllama : name === 'kiln-st' ? b.ratio_kiln_st_vs_wllama_1t : null;
    const c = b.check[name];
    const chk = c ? `${yn(c.same_tokens_as_llamacpp)}${c.same_tokens_as_llamacpp === false ? ` (from ${c.first_diff})` : ''} / ${yn(c.same_text_as_wllama)}`
      : name.startsWith('wllama') ? `text ${yn(b.wllama_text_matches_llamacpp)} / —` : '—';
    rows.push([b.model, name, e.threads, e.error ? `error: ${e.error.slice(0, 48)}` : range(e.pp_stats, 1), e.error ? '—' : range(e.tg_stats, 2),
      e.bw_frac == null ? '—' : `${(100 * e.bw_frac).toFixed(1)}%`, ratio ? range(ratio) : '—', chk,
      e.load_ms.length ? (stats(e.load_ms).median / 1000).toFixed(1) : '—']);
  }
  sections.push(`Chromium, greedy, ${nGen} tokens, prompt tokens ${bs.map((b) => `${b.model} ${Object.values(b.engines).find((e) => e.prompt_n)?.prompt_n ?? '?'}`).join(', ')}; rounds: ${bs.map((b) => b.rounds).join('/')} (each engine loads once in its own page, engines take turns per round); tokens/s median (min–max); kiln/wllama: per-round ratio vs wllama at the same threads\n` +
    table(rows, ['model', 'engine', 'thr', 'pp tok/s', 'tg tok/s', 'bw frac', 'kiln/wllama', 'same ids as llama.cpp / text as wllama', 'load s']));
  for (const [k, key] of [['synth-q4_0', 'gen_vs_wllama_q4_0'], ['synth-q8_0', 'gen_vs_wllama_q8_0'], ['synth-q4_K_M', 'gen_vs_wllama_q4_k_m']]) {
    const b = bs.find((x) => x.model === k);
    summary[key] = b?.ratio_kiln_mt_vs_wllama?.median ?? null;
  }
  // read bandwidth used by generation: the better of kiln-mt (N threads) and kiln-st (1)
  for (const [k, key] of [['synth-q4_0', 'bw_browser_q4_0'], ['synth-q8_0', 'bw_browser_q8_0']]) {
    const e = bs.find((x) => x.model === k)?.engines;
    const fr = [e?.['kiln-mt']?.bw_frac, e?.['kiln-st']?.bw_frac].filter((x) => Number.isFinite(x));
    summary[key] = fr.length ? Math.max(...fr) : null;
  }
  const longRows = [];
  for (const b of bs) {
    const w = b.engines.wllama?.long, kmt = b.engines['kiln-mt']?.long, kst = b.engines['kiln-st']?.long;
    if (!w && !kmt && !kst) continue;
    for (const [name, l] of [['wllama', w], ['kiln-mt', kmt], ['kiln-st', kst]]) {
      if (!l) continue;
      longRows.push([b.model, name, name === 'kiln-st' ? 1 : t, l.pp?.error ? `error: ${l.pp.error.slice(0, 40)}` : `${l.pp?.prompt_n ?? '?'}`, l.pp?.pp != null ? l.pp.pp.toFixed(1) : '—',
        l.ttft?.error ? `error: ${l.ttft.error.slice(0, 40)}` : `${l.ttft?.prompt_n ?? '?'}`, l.ttft?.ms != null ? (l.ttft.ms / 1000).toFixed(2) : '—']);
    }
    if (b.model === 'synth-q4_0') {
      if (kmt?.pp?.pp && w?.pp?.pp) summary.pp512_vs_wllama_q4_0 = kmt.pp.pp / w.pp.pp;
      else summary.pp512_vs_wllama_q4_0_reason = `kiln-mt: ${kmt?.pp?.error ?? (kmt?.pp?.pp ? 'ok' : 'not run')}; wllama: ${w?.pp?.error ?? (w?.pp?.pp ? 'ok' : 'not run')}`;
      if (kmt?.ttft?.ms) summary.ttft_chat512_s_kiln_mt_q4_0 = kmt.ttft.ms / 1000;
      if (kmt?.ttft?.ms && w?.ttft?.ms) summary.ttft_chat512_vs_wllama_q4_0 = w.ttft.ms / kmt.ttft.ms;
    }
  }
  if (longRows.length) {
    sections.push(`Chromium, long prompts (one run each, after the rounds): a ${longTokens}-token story (prompt tokens/s), and time to first token of a ${longTokens}-token ChatML chat prompt (wall time of a one-token greedy completion in the page)\n` +
      table(longRows, ['model', 'engine', 'thr', 'prompt tokens', 'pp tok/s', 'chat prompt tokens', 'first token s']));
  }
}

if (llamaHandle) await llamaHandle.llama.dispose();
console.log(`\nKiln peers benchmark — ${new Date().toISOString()}, ${(Date.now() - t0) / 1000 | 0} s, JSON lines: ${path.relative(root, jsonFile)}\n`);
for (const s of sections) console.log(s + '\n');
for (const n of notes) console.log('note: ' + n);
if (summary.gen_vs_wllama_q4_k_m == null && !summary.gen_vs_wllama_q4_k_m_reason)
  summary.gen_vs_wllama_q4_k_m_reason = which.includes('q4_k_m') ? 'the browser rows did not measure synth-q4_K_M (see the log)' : 'q4_k_m not in --models';
console.log(JSON.stringify(summary));
