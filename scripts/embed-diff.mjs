// Developer check (not CI): how far Kiln's stories260K embeddings (the
// decoder path: F32 weights, F16 KV cache, last token) are from llama.cpp's
// (node-llama-cpp's LlamaEmbeddingContext, the oracle's pinned CPU build),
// per engine: native kiln-embed (--isa ROW, default the oracle's row) and the
// wasm builds in this process (kiln-st SIMD128, and kiln-st relaxed when
// Node runs with --experimental-wasm-relaxed-simd). Prints, per engine, the
// largest |diff| after L2 normalization and 1 - cosine over the texts of
// tests/js/embed.test.ts and tests/e2e/embed.test.mjs, and how many vector
// elements differ at all from llama.cpp's.
//
//   node --experimental-wasm-relaxed-simd scripts/embed-diff.mjs [--model F] [--isa avx2] [--skip-native]
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadOracleLlama, oracleIsa } from '../tests/oracle/llamacpp.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
const MODEL = path.resolve(arg('--model', path.join(root, 'models/stories260K.gguf')));
const ISA = arg('--isa', oracleIsa() ?? '');
const TEXTS = ['Hello world', 'The quick brown fox jumps over the lazy dog.', 'Äpfel und Birnen: naïve café owners\' résumés!',
  'search boxes rank documents by the cosine of their embeddings', 'Äpfel und Birnen: naïve café owners\' résumés (2024)!',
  'Once upon a time, there was a little girl named Lily.', 'The cat sat on the mat and looked at the bird in the tree.'];

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
function stats(got, ref) {
  const n = norm(ref);
  let d = 0, dot = 0, ne = 0;
  for (let i = 0; i < ref.length; i++) {
    const r = ref[i] / n;
    d = Math.max(d, Math.abs(got[i] - r));
    dot += got[i] * ref[i];
    if (Math.fround(got[i]) !== Math.fround(r)) ne++;
  }
  return { d, cos: dot / (norm(got) * n), ne };
}
function report(name, vecs, ref) {
  let worst = 0, cos = 1, ne = 0;
  const per = [];
  for (let t = 0; t < TEXTS.length; t++) {
    const s = stats(vecs[t], ref[t]);
    worst = Math.max(worst, s.d); cos = Math.min(cos, s.cos); ne += s.ne;
    per.push(s.d.toExponential(1));
  }
  console.log(`${name.padEnd(22)} max |diff| ${worst.toExponential(2)}  1-cos ${(1 - cos).toExponential(2)}  per text [${per.join(' ')}]`);
}

const llama = await loadOracleLlama();
const lm = await llama.loadModel({ modelPath: MODEL, defaultContextFlashAttention: true });
const ctx = await lm.createEmbeddingContext({ contextSize: 128, batchSize: 128, threads: 1 });
const ref = [];
for (const t of TEXTS) ref.push([...(await ctx.getEmbeddingFor(t)).vector]);
await ctx.dispose(); await lm.dispose(); await llama.dispose();

if (!process.argv.includes('--skip-native')) {
  for (const isa of ISA ? ISA.split(',') : ['']) {
    const r = spawnSync(path.join(root, 'build/bin/kiln-embed'), ['-m', MODEL, '--json', '-t', '1', '--normalize', '1', '--pooling', 'last',
      ...(isa ? ['--isa', isa] : [])], { input: TEXTS.join('\n') + '\n', encoding: 'utf8' });
    if (r.status !== 0) throw new Error(r.stderr);
    report(`native ${isa || 'default'}`, r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)), ref);
  }
}
const { Kiln } = await import(path.join(root, 'js/dist/index.js'));
const relaxedOk = process.execArgv.includes('--experimental-wasm-relaxed-simd') || Number(process.versions.node.split('.')[0]) >= 22;
for (const simd of relaxedOk ? ['simd128', 'relaxed'] : ['simd128']) {
  const kiln = await Kiln.create({ build: 'st', simd, logLevel: 'error' });
  const m = await kiln.loadModel(MODEL);
  report(`wasm st ${simd}`, (await m.embed(TEXTS, { pooling: 'last' })).map((v) => Array.from(v)), ref);
  m.free(); kiln.destroy();
}
