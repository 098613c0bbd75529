// Embedding speed, one thread, in one run: Kiln native (build/bin/kiln-embed
// --timing), Kiln wasm st under Node (js/dist + wasm/dist/st) and llama.cpp
// (node-llama-cpp's LlamaEmbeddingContext, its own best CPU variant) on
// random-weight encoders at all-MiniLM-L6's shapes (kiln-synth-encoder:
// 384 wide, 6 layers, 12 heads, 1536 FFN, 30522 tokens), F32 and Q8_0,
// over the same 32 sentences (17 tokens each with [CLS] and [SEP]). One JSON
// line per engine and type; compare them as ratios within one run.
//
//   node bench/embed.mjs [REPS=3]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const reps = Number(process.argv[2] || 3);
const cpu = os.cpus()[0]?.model ?? 'unknown';
const dir = path.join(root, 'build/bench-embed');
mkdirSync(dir, { recursive: true });
const TEXTS = Array.from({ length: 32 }, (_, i) => `Embeddings map sentence number ${i + 1} to a vector for semantic search.`);
const textFile = path.join(dir, 'texts.txt');
writeFileSync(textFile, TEXTS.join('\n') + '\n');
const out = (o) => console.log(JSON.stringify({ bench: 'embed', cpu, threads: 1, texts: TEXTS.length, ...o }));
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];

const { Kiln } = await import(path.join(root, 'js/dist/index.js'));
const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
const kiln = await Kiln.create({ build: 'st', threads: 1, logLevel: 'error' });

for (const type of ['f32', 'q8_0']) {
  const file = path.join(dir, `minilm-l6-${type}.gguf`);
  execFileSync(path.join(root, 'build/bin/kiln-synth-encoder'), [file, '--arch', 'bert', '--type', type, '--pooling', 'mean',
    '--vocab', path.join(root, 'tests/data/vocab/ggml-vocab-bert-bge.gguf'),
    '--width', '384', '--layers', '6', '--heads', '12', '--ff', '1536', '--ctx', '512']);
  const model = `minilm-l6-${type}`;
  let tokens = 0;
  // native
  const nat = [];
  for (let r = 0; r < reps; r++) {
    const res = spawnSync(path.join(root, 'build/bin/kiln-embed'), ['-m', file, '-t', '1', '--timing'],
      { input: TEXTS.join('\n') + '\n', encoding: 'utf8', maxBuffer: 64 << 20 });
    if (res.status !== 0) throw new Error(`kiln-embed: ${res.stderr}`);
    const line = JSON.parse(res.stderr.trim().split('\n').pop());
    nat.push(line.seconds);
    tokens = line.tokens;
  }
  const sN = median(nat);
  out({ impl: 'kiln-native', model, type, tokens, seconds: sN, tokens_per_s: tokens / sN });
  // wasm (st) in this process
  const m = await kiln.loadModel(file);
  await m.embed(TEXTS[0]);
  const was = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    await m.embed(TEXTS);
    was.push((performance.now() - t0) / 1000);
  }
  m.free();
  const sW = median(was);
  out({ impl: 'kiln-wasm-st-node', model, type, tokens, seconds: sW, tokens_per_s: tokens / sW });
  // llama.cpp
  const lm = await llama.loadModel({ modelPath: file });
  const ctx = await lm.createEmbeddingContext({ contextSize: 512, batchSize: 512, threads: 1 });
  await ctx.getEmbeddingFor(TEXTS[0]);
  const ll = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    for (const t of TEXTS) await ctx.getEmbeddingFor(t);
    ll.push((performance.now() - t0) / 1000);
  }
  await ctx.dispose();
  await lm.dispose();
  const sL = median(ll);
  out({ impl: 'llama.cpp', model, type, tokens, seconds: sL, tokens_per_s: tokens / sL });
}
kiln.destroy();
await llama.dispose();
