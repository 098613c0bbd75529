// Where a wasm generation's time goes: runs one greedy generation through the
// npm package in Node under V8's CPU profiler (--cpu-prof, which also
// profiles the engine's worker thread) and prints the functions by self time
// and the time per generated token split into graph compute, graph build +
// allocation (kiln_model_eval outside kiln_graph_compute), sampling +
// detokenizing (kw_llm_step outside kiln_model_eval), and JS.
//
//   node bench/peers/profile.mjs MODEL.gguf [--build st|mt] [--threads N] [--gen N (16)] [--prompt TEXT]
//        [--long N (a story of ~N tokens as the prompt, run.mjs's)] [--simd relaxed|simd128 (default: simd128)]
//        [--callers NAME] [--under NAME (count only samples inside NAME: --under kw_llm_step, generation alone;
//        the split lines then cover those samples only)]
//
// --simd relaxed profiles the relaxed-SIMD build that Chromium runs (kiln-st-relaxed / kiln-mt-relaxed;
// this script passes Node 20 the flag), whose symbol map is wasm/dist/<build>-relaxed/kiln-<build>-relaxed.js.symbols.
//
// wasm function names need the build's symbol map: relink once with
//   source scripts/wasm-env.sh; emcmake cmake -S . -B build-wasm-st -DCMAKE_EXE_LINKER_FLAGS=--emit-symbol-map
//   cmake --build build-wasm-st --target kiln-wasm      (writes wasm/dist/st/kiln-st.js.symbols)
// (for --simd relaxed: build-wasm-st-relaxed after kiln_wasm_relaxed_env, as scripts/build-wasm.sh does)
// Without it, functions show as wasm-function[i].
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(`--${k}`); return i >= 0 ? args[i + 1] : d; };

if (args[0] === '--child') {
  const [, model, build, threads, gen, prompt, simd, ctx] = args;
  const { Kiln } = await import(path.join(root, 'js/dist/index.js'));
  const k = await Kiln.create({ build, threads: +threads, simd });
  const m = await k.loadModel(model, { nCtx: +ctx });
  await m.complete('Once upon', { maxTokens: 3, temperature: 0 }); // tier-up before the profiled part matters
  const t0 = performance.now();
  const r = await m.complete(prompt, { maxTokens: +gen, temperature: 0, repeatPenalty: 1, cachePrompt: false });
  console.log(JSON.stringify({ wall_s: (performance.now() - t0) / 1e3, stats: r.stats }));
  m.free();
  await new Promise((res) => setTimeout(res, 300));
  k.destroy();
  await new Promise((res) => setTimeout(res, 1500)); // the worker writes its profile as it exits
  process.exit(0);
}

const model = args[0];
if (!model || !existsSync(model)) { console.error('usage: node bench/peers/profile.mjs MODEL.gguf [--build st|mt] [--threads N] [--gen N] [--prompt TEXT]'); process.exit(2); }
const build = opt('build', 'st'), threads = build === 'st' ? 1 : +opt('threads', 2), gen = +opt('gen', 16);
const simd = opt('simd', 'simd128'), longN = +opt('long', 0);
if (simd !== 'relaxed' && simd !== 'simd128') { console.error('--simd: relaxed or simd128'); process.exit(2); }
const STORY = ['Once upon a time, there was a little girl named Lily.', 'She loved to play outside in the big green park near her house.',
  'One day she found a small red ball under a tree.', 'She asked her mom if she could keep it, and her mom said yes.',
  'Lily played with the ball every day with her friend Tom.', 'They threw it high in the sky and laughed when it came down.',
  'When the sun went down, they went home for dinner and told their parents about the game.'];
const storyOf = (chars) => { let t = ''; for (let i = 0; t.length < chars; i++) t += (t ? ' ' : '') + STORY[i % STORY.length]; return t; };
const prompt = longN > 0 ? storyOf(Math.round(longN * 4.2)) : opt('prompt', 'Once upon a time, there was a little girl named Lily.');
const ctx = Math.max(256, longN + 128);
const variant = simd === 'relaxed' ? `${build}-relaxed` : build;
const dir = mkdtempSync(path.join(tmpdir(), 'kiln-prof-'));
const r = spawnSync(process.execPath, ['--experimental-wasm-relaxed-simd', '--cpu-prof', `--cpu-prof-dir=${dir}`, fileURLToPath(import.meta.url), '--child', path.resolve(model), build, String(threads), String(gen), prompt, simd, String(ctx)], { encoding: 'utf8' });
if (r.status !== 0) { console.error(r.stderr); process.exit(1); }
const run = JSON.parse(r.stdout.trim().split('\n').pop());
const symFile = path.join(root, `wasm/dist/${variant}/kiln-${variant}.js.symbols`);
const sym = new Map();
if (existsSync(symFile)) for (const l of readFileSync(symFile, 'utf8').split('\n')) { const i = l.indexOf(':'); if (i > 0) sym.set(+l.slice(0, i), l.slice(i + 1)); }
const fname = (cf) => { const m = /^wasm-function\[(\d+)\]$/.exec(cf.functionName); return m ? sym.get(+m[1]) ?? cf.functionName : cf.functionName || `(anon ${path.basename(cf.url)})`; };

const self = new Map(); const incl = new Map(); const callers = new Map(); let busy = 0; let threadsSeen = 0;
const callersOf = opt('callers', null); // --callers NAME: who calls NAME (self time by call chain)
const under = opt('under', null); // --under NAME: only samples inside NAME (e.g. kw_llm_step: generation alone)
for (const f of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
  const p = JSON.parse(readFileSync(path.join(dir, f), 'utf8'));
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  let any = false;
  p.samples.forEach((s, i) => {
    const d = p.timeDeltas[i] / 1e3; const n = nodes.get(s); const name = fname(n.callFrame);
    if (name === '(idle)' || name === '(program)') return;
    if (under) {
      let inside = false;
      for (let id = s; id != null && !inside; id = parent.get(id)) inside = fname(nodes.get(id).callFrame) === under;
      if (!inside) return;
    }
    any = true; busy += d;
    self.set(name, (self.get(name) ?? 0) + d);
    if (callersOf && name === callersOf) {
      const chain = []; for (let id = parent.get(s); id != null && chain.length < 4; id = parent.get(id)) chain.push(fname(nodes.get(id).callFrame));
      const key = chain.join(' < '); callers.set(key, (callers.get(key) ?? 0) + d);
    }
    const seen = new Set();
    for (let id = s; id != null; id = parent.get(id)) { const nm = fname(nodes.get(id).callFrame); if (!seen.has(nm)) { seen.add(nm); incl.set(nm, (incl.get(nm) ?? 0) + d); } }
  });
  if (any) threadsSeen++;
}
rmSync(dir, { recursive: true, force: true });
const g = (k) => incl.get(k) ?? 0;
const compute = g('kiln_graph_compute'), evalT = g('kiln_model_eval'), next = g('kw_llm_step'), start = g('kw_llm_start');
const wasmT = [...self.entries()].filter(([k]) => !k.startsWith('(') && sym.size && [...sym.values()].includes(k)).reduce((a, [, v]) => a + v, 0);
const nTok = run.stats.generatedTokens, nPrompt = run.stats.promptTokens;
console.log(`${path.basename(model)}, kiln-${variant}, ${threads} thread(s): prompt ${nPrompt} tokens at ${run.stats.promptTokensPerSecond.toFixed(1)} tok/s, ${nTok} generated at ${run.stats.tokensPerSecond.toFixed(2)} tok/s; profiled threads: ${threadsSeen}; busy CPU ${(busy / 1e3).toFixed(2)} s (includes load and warm-up)`);
console.log(`split of kw_llm_start + kw_llm_step (prompt + generation): graph compute ${compute.toFixed(0)} ms, graph build + alloc ${(evalT - compute).toFixed(0)} ms, sampling + pieces ${(next + start - evalT).toFixed(0)} ms; JS and other non-wasm CPU ${(busy - wasmT).toFixed(0)} ms`);
console.log(`per generated token (from ${nTok} tokens, the prompt's share excluded by kw_llm_step): ${(g('kw_llm_step') / nTok).toFixed(1)} ms in kw_llm_step`);
console.log('\nself time (all threads):');
for (const [k, v] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`${((100 * v) / busy).toFixed(1).padStart(5)}%  ${v.toFixed(0).padStart(6)} ms  ${k}`);
if (callersOf) {
  console.log(`\ncallers of ${callersOf}:`);
  for (const [k, v] of [...callers.entries()].sort((a, b) => b[1] - a[1]).slice(0, 8)) console.log(`${v.toFixed(0).padStart(6)} ms  ${k}`);
}
