// LoRA adapters through the wasm engine, st and mt: a rank-4 adapter in
// llama.cpp's GGUF format (written here) on stories260K's attention q/v and
// output weights, loaded with loadModel(src, {lora}); greedy tokens against
// llama.cpp (node-llama-cpp, the pinned CPU variant of
// tests/oracle/llamacpp.mjs) running the same base model and adapter file, at
// scale 1 and 0.5; a path, bytes and a Blob give the same; sessions apply it
// too; an adapter of another architecture fails the load and the engine
// stays usable.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KilnError, type Kiln } from '../../js/dist/index.js';
import { loadOracleLlama } from '../oracle/llamacpp.mjs';
import { BUILDS, MODEL, engine, rand } from './helpers.js';

const PROMPT = 'Once upon a time';
const N = 48;

// a GGUF v3 file: string / f32 metadata, F32 tensors (ggml order: ne0 first)
function gguf(kv: [string, string | number][], tensors: { name: string; ne: number[]; data: Float32Array }[]): Uint8Array {
  const enc = new TextEncoder();
  const parts: number[] = [];
  const u32 = (v: number) => { for (let i = 0; i < 4; i++) parts.push((v >>> (8 * i)) & 255); };
  const u64 = (v: number) => { u32(v % 2 ** 32); u32(Math.floor(v / 2 ** 32)); };
  const str = (s: string) => { const b = enc.encode(s); u64(b.length); parts.push(...b); };
  parts.push(...enc.encode('GGUF'));
  u32(3); u64(tensors.length); u64(kv.length);
  for (const [k, v] of kv) {
    str(k);
    if (typeof v === 'string') { u32(8); str(v); } else { u32(6); parts.push(...new Uint8Array(new Float32Array([v]).buffer)); }
  }
  let off = 0;
  for (const t of tensors) {
    str(t.name); u32(t.ne.length); for (const n of t.ne) u64(n); u32(0); u64(off);
    off += Math.ceil(t.data.byteLength / 32) * 32;
  }
  while (parts.length % 32) parts.push(0);
  const out = new Uint8Array(parts.length + off);
  out.set(parts);
  let p = parts.length;
  for (const t of tensors) { out.set(new Uint8Array(t.data.buffer), p); p += Math.ceil(t.data.byteLength / 32) * 32; }
  return out;
}

// rank 4, alpha 8 on blk.*.attn_q / attn_v and output.weight of stories260K
// (embedding 64, 5 layers, kv width 32, vocabulary 512)
function adapter(arch = 'llama'): Uint8Array {
  const r = 4;
  const tensors: { name: string; ne: number[]; data: Float32Array }[] = [];
  let seed = 7;
  const pair = (w: string, nIn: number, nOut: number) => {
    tensors.push({ name: `${w}.lora_a`, ne: [nIn, r], data: rand(nIn * r, seed++).map((x) => x * Math.sqrt(3 / nIn)) });
    tensors.push({ name: `${w}.lora_b`, ne: [r, nOut], data: rand(r * nOut, seed++).map((x) => x * 0.5) });
  };
  for (let l = 0; l < 5; l++) { pair(`blk.${l}.attn_q.weight`, 64, 64); pair(`blk.${l}.attn_v.weight`, 64, 32); }
  pair('output.weight', 64, 512);
  return gguf([['general.architecture', arch], ['general.type', 'adapter'], ['adapter.type', 'lora'], ['adapter.lora.alpha', 8]], tensors);
}

const dir = mkdtempSync(path.join(tmpdir(), 'kiln-lora-'));
const FILE = path.join(dir, 'adapter.gguf');
const BYTES = adapter();
writeFileSync(FILE, BYTES);

// llama.cpp's greedy tokens with the adapter at each scale, and without
const ref = new Map<number, number[]>();
beforeAll(async () => {
  const llama = await loadOracleLlama();
  const lm = await llama.loadModel({ modelPath: MODEL });
  for (const scale of [0, 0.5, 1]) {
    const ctx = await lm.createContext({ contextSize: 128, threads: 1, sequences: 1,
      ...(scale ? { lora: { adapters: [{ filePath: FILE, scale }] } } : {}) });
    const seq = ctx.getSequence();
    const ids: number[] = [];
    const input = [...(lm.tokens.shouldPrependBosToken ? [lm.tokens.bos!] : []), ...lm.tokenize(PROMPT)];
    const greedy = { generateNext: { token: true, options: { temperature: 0 } } };
    let next = (await seq.controlledEvaluate([...input.slice(0, -1), [input.at(-1)!, greedy]])).at(-1)!.next.token;
    while (ids.length < N && next != null && !lm.isEogToken(next)) {
      ids.push(next);
      if (ids.length === N) break;
      next = (await seq.controlledEvaluate([[next, greedy]]))[0].next.token;
    }
    ref.set(scale, ids);
    await ctx.dispose();
  }
  await lm.dispose();
  await llama.dispose();
}, 120_000);

describe.each(BUILDS)('LoRA adapters (%s)', (build) => {
  let kiln: Kiln;
  beforeAll(async () => { kiln = await engine(build, build === 'mt' ? 2 : 1); });
  afterAll(() => kiln?.destroy());

  it('the adapter changes llama.cpp\'s output (the comparison is not vacuous)', () => {
    expect(ref.get(1)!.length).toBe(N);
    expect(ref.get(1)).not.toEqual(ref.get(0));
    expect(ref.get(0.5)).not.toEqual(ref.get(1));
  });

  it.each([1, 0.5])('greedy tokens equal llama.cpp\'s with the adapter at scale %s', async (scale) => {
    const model = await kiln.loadModel(MODEL, { lora: [{ source: FILE, scale }] });
    const r = await model.complete(PROMPT, { maxTokens: N, temperature: 0 });
    expect(r.tokens).toEqual(ref.get(scale));
    model.free();
  });

  it('bytes and a Blob give the same; sessions apply the adapter too', async () => {
    const a = await kiln.loadModel(MODEL, { lora: [{ source: BYTES.slice(), scale: 1 }] });
    const b = await kiln.loadModel(readFileSync(MODEL), { lora: [{ source: new Blob([BYTES]) }] });
    expect((await a.complete(PROMPT, { maxTokens: N, temperature: 0 })).tokens).toEqual(ref.get(1));
    expect((await b.complete(PROMPT, { maxTokens: N, temperature: 0 })).tokens).toEqual(ref.get(1));
    const s = a.session();
    expect((await s.complete(PROMPT, { maxTokens: N, temperature: 0 })).tokens).toEqual(ref.get(1));
    s.free();
    a.free();
    b.free();
  });

  it('an adapter that does not fit fails the load; the engine stays usable', async () => {
    const err = await kiln.loadModel(MODEL, { lora: [{ source: adapter('qwen3') }] }).catch((e) => e);
    expect(err).toBeInstanceOf(KilnError);
    expect(String(err.message)).toMatch(/architecture 'qwen3' differs from the model's 'llama'/);
    await expect(kiln.loadModel(MODEL, { lora: [{ source: BYTES, scale: NaN }] })).rejects.toThrow(/scale must be a finite number/);
    await expect(kiln.loadModel(MODEL, { lora: [{ source: path.join(dir, 'missing.gguf') }] })).rejects.toThrow(/cannot read/);
    const model = await kiln.loadModel(MODEL);
    expect((await model.complete(PROMPT, { maxTokens: N, temperature: 0 })).tokens).toEqual(ref.get(0));
    model.free();
  });
});
