// A/B of two Kiln wasm builds in Node by CPU time per generated token
// (process.cpuUsage covers the engine's worker thread): for a loaded, shared
// machine, where wall time (ab.mjs in Chromium) drifts with the neighbours.
// Each build loads once; rounds alternate the builds; per round one greedy
// completion of N tokens minus one of 1 token (cancels the prompt).
//   node --experimental-wasm-relaxed-simd bench/peers/ab-cpu.mjs MODEL.gguf DIR_A DIR_B [ROUNDS (5)] [N (24)] [BUILD (st)]
//   DIR: laid out as wasm/dist (st-relaxed/ ...). Prints each round and a JSON line of medians (ms CPU per token).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [model, dirA, dirB, rounds = 5, n = 24, build = 'st'] = process.argv.slice(2);
const { Kiln } = await import(path.join(root, 'js/dist/index.js'));
const bytes = new Uint8Array(readFileSync(model));
const prompt = 'Once upon a time, there was a little girl named Lily. She loved to play outside.';
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e3; };
const engines = [];
for (const [name, dir] of [['A', dirA], ['B', dirB]]) {
  const kiln = await Kiln.create({ build, simd: 'relaxed', threads: build === 'mt' ? 2 : 1, logLevel: 'error', wasmUrl: pathToFileURL(path.resolve(dir) + '/').href });
  const m = await kiln.loadModel(bytes.slice(), { nCtx: 256 });
  await m.complete('Once upon', { maxTokens: 3, temperature: 0 });
  engines.push({ name, kiln, m, isa: kiln.info().isa, per: [] });
}
const run = async (m, toks) => { const c0 = cpu(); const r = await m.complete(prompt, { maxTokens: toks, temperature: 0, cachePrompt: false }); return [cpu() - c0, r.tokens.join()]; };
for (let r = 0; r < +rounds; r++) {
  for (const e of engines) {
    const [cn, ids] = await run(e.m, +n); const [c1] = await run(e.m, 1);
    e.per.push((cn - c1) / (+n - 1)); e.ids = ids;
  }
  console.error('round', r, engines.map((e) => `${e.name} ${e.per[r].toFixed(2)} ms`).join('  '));
}
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
console.log(JSON.stringify({ what: 'ab_cpu', model: path.basename(model), build, n: +n, isa: engines.map((e) => e.isa), same_tokens: engines[0].ids === engines[1].ids,
  ms_cpu_per_token: Object.fromEntries(engines.map((e) => [e.name, +med(e.per).toFixed(3)])), all: Object.fromEntries(engines.map((e) => [e.name, e.per.map((x) => +x.toFixed(3))])) }));
for (const e of engines) { e.m.free(); e.kiln.destroy(); }
process.exit(0);
