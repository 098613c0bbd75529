// Counts the calls the engine worker makes into the wasm module while it
// generates: one line per generation with every kw_* export called between
// kw_llm_start and the end (the counting wrapper is bench/wasm-calls-hook.cjs,
// loaded into the worker with --require, which workers inherit).
//
//   node --require ./bench/wasm-calls-hook.cjs bench/wasm-calls.mjs [st|mt]
// Needs wasm/dist and js/dist (npm run build).
import { fileURLToPath } from 'node:url';
import { Kiln } from '../js/dist/index.js';

const build = process.argv[2] ?? 'st';
const kiln = await Kiln.create({ build, simd: 'simd128' });
const model = await kiln.loadModel(fileURLToPath(new URL('../models/stories260K.gguf', import.meta.url)));
for (const n of [50, 200]) {
  const r = await model.complete('Once upon a time', { maxTokens: n, temperature: 0 });
  console.log(JSON.stringify({ what: 'generated', tokens: r.tokens.length, stop: r.stopReason }));
}
kiln.destroy();
