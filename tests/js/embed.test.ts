// Embeddings through the wasm worker (st and mt) against llama.cpp's
// (node-llama-cpp's LlamaEmbeddingContext, the oracle's pinned CPU build):
// random-weight bert and nomic-bert encoders (kiln-synth-encoder, written to
// build/js-fixtures by scripts/test-js.sh or here) and the stories260K
// decoder; batches, pooling 'none', normalize false, bad input.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KilnError, type Kiln, type Model } from '../../js/dist/index.js';
import { BUILDS, MODEL, engine } from './helpers.js';
// @ts-expect-error: a plain ES module without types
import { loadOracleLlama } from '../oracle/llamacpp.mjs';

const root = new URL('../../', import.meta.url).pathname;
const FIX = `${root}build/js-fixtures`;
const VOCAB = `${root}tests/data/vocab/ggml-vocab-bert-bge.gguf`;
const ENCODERS: [string, string[]][] = [
  ['bert-mean-f32', ['--arch', 'bert', '--pooling', 'mean']],
  ['nomic-bert-cls-f32', ['--arch', 'nomic-bert', '--pooling', 'cls']],
];
const TEXTS = ['Hello world', 'The quick brown fox jumps over the lazy dog.', 'Äpfel und Birnen: naïve café owners\' résumés!'];

const fileOf = (name: string) => `${FIX}/${name}.gguf`;
function fixture(name: string, args: string[]): string {
  const file = fileOf(name);
  if (!existsSync(file)) {
    mkdirSync(FIX, { recursive: true });
    execFileSync(`${root}build/bin/kiln-synth-encoder`, [file, '--vocab', VOCAB, ...args]);
  }
  return file;
}

const norm = (v: ArrayLike<number>) => Math.sqrt(Array.from(v).reduce((s, x) => s + x * x, 0));
function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let d = 0;
  for (let i = 0; i < b.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}
function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < b.length; i++) s += a[i] * b[i];
  return s / (norm(a) * norm(b));
}

// llama.cpp's raw vectors per model file and text
const ref = new Map<string, number[][]>();

beforeAll(async () => {
  const llama = await loadOracleLlama();
  const files = [...ENCODERS.map(([n, a]) => fixture(n, a)), MODEL];
  for (const file of files) {
    const enc = file !== MODEL;
    const lm = await llama.loadModel({ modelPath: file, defaultContextFlashAttention: !enc });
    const ctx = await lm.createEmbeddingContext({ contextSize: 128, batchSize: 128, threads: 1 });
    const vecs: number[][] = [];
    for (const t of TEXTS) vecs.push([...(await ctx.getEmbeddingFor(t)).vector]);
    ref.set(file, vecs);
    await ctx.dispose();
    await lm.dispose();
  }
  await llama.dispose();
});

describe.each(BUILDS)('embeddings (%s)', (build) => {
  let kiln: Kiln;
  const models = new Map<string, Model>();
  beforeAll(async () => {
    kiln = await engine(build, build === 'mt' ? 2 : 1);
    for (const [n, a] of ENCODERS) models.set(n, await kiln.loadModel(fixture(n, a)));
    models.set('stories260K', await kiln.loadModel(MODEL));
  });
  afterAll(() => { for (const m of models.values()) m.free(); kiln?.destroy(); });

  it.each(ENCODERS.map(([n]) => n))('%s: normalized vectors equal llama.cpp\'s (max |diff| <= 1e-4, cosine >= 0.99999)', async (name) => {
    const m = models.get(name)!;
    const want = ref.get(fileOf(name))!;
    const got = await m.embed(TEXTS);
    expect(got).toHaveLength(TEXTS.length);
    for (let i = 0; i < TEXTS.length; i++) {
      const l = want[i], n = norm(l);
      expect(got[i]).toBeInstanceOf(Float32Array);
      expect(got[i].length).toBe(l.length);
      expect(Math.abs(norm(got[i]) - 1)).toBeLessThan(1e-6);
      expect(maxDiff(got[i], l.map((x) => x / n))).toBeLessThanOrEqual(1e-4);
      expect(cosine(got[i], l)).toBeGreaterThanOrEqual(0.99999);
    }
    // one text at a time: the same vectors
    const one = await m.embed(TEXTS[1]);
    expect(maxDiff(one, got[1])).toBe(0);
  });

  it('normalize: false gives llama.cpp\'s raw vector; pooling none gives every token\'s', async () => {
    const m = models.get('bert-mean-f32')!;
    const l = ref.get(fileOf('bert-mean-f32'))![0];
    const raw = await m.embed(TEXTS[0], { normalize: false });
    const scale = Math.max(...l.map(Math.abs));
    expect(maxDiff(raw, l) / scale).toBeLessThanOrEqual(1e-4);
    // [CLS] hello world [SEP]: 4 tokens of 128; their mean is the mean pooling
    const all = await m.embed(TEXTS[0], { pooling: 'none', normalize: false });
    expect(all.length).toBe(4 * 128);
    const mean = new Float64Array(128);
    for (let t = 0; t < 4; t++) for (let j = 0; j < 128; j++) mean[j] += all[t * 128 + j] / 4;
    expect(maxDiff(mean, raw)).toBeLessThan(1e-5);
    const cls = await m.embed(TEXTS[0], { pooling: 'cls', normalize: false });
    expect(maxDiff(cls, all.subarray(0, 128))).toBe(0);
    const last = await m.embed(TEXTS[0], { pooling: 'last', normalize: false });
    expect(maxDiff(last, all.subarray(3 * 128))).toBe(0);
  });

  // The bar, as for the encoders. The decoder's F16 KV cache and
  // flash attention's fp16 V accumulator turn a last-bit difference anywhere
  // upstream into a whole fp16 step now and then, so the wasm kernels sum as
  // llama.cpp's AVX2 build (f32 products in tinyBLAS's / ggml_vec_dot_f32's
  // order, the f16 K.Q dot in ggml's, silu through ggml's vector expf).
  // Measured on these texts: relaxed SIMD (fused multiply-adds) max |diff|
  // <= 3.2e-8 (llama.cpp's floats; the rest is the normalization's
  // rounding); SIMD128, which has no FMA, 7.6e-5 (was 1.3e-4 in the packed
  // order).
  it('a decoder (stories260K): the last token\'s final-norm state, as llama.cpp (max |diff| <= 1e-4)', async () => {
    const m = models.get('stories260K')!;
    const want = ref.get(MODEL)!;
    const got = await m.embed(TEXTS, { pooling: 'last' });
    for (let i = 0; i < TEXTS.length; i++) {
      const l = want[i], n = norm(l);
      expect(maxDiff(got[i], l.map((x) => x / n))).toBeLessThanOrEqual(1e-4);
      expect(cosine(got[i], l)).toBeGreaterThanOrEqual(0.99999);
    }
    // the model still generates afterwards (the cache was emptied)
    const c = await m.complete('Once upon a time', { maxTokens: 4, temperature: 0 });
    expect(c.tokens.length).toBe(4);
  });

  it('bad input is a KilnError', async () => {
    const m = models.get('bert-mean-f32')!;
    await expect(m.embed('x', { pooling: 'max' as never })).rejects.toBeInstanceOf(KilnError);
    await expect(m.embed(42 as never)).rejects.toBeInstanceOf(KilnError);
    // longer than the 128 positions of the synthetic model
    await expect(m.embed('word '.repeat(200))).rejects.toThrow(/context/);
    // an encoder does not generate
    await expect(m.complete('Hello', { maxTokens: 1 })).rejects.toThrow(/encoder/);
    // still usable
    expect((await m.embed('Hello world')).length).toBe(128);
  });
});
