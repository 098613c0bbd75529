// model.finetune(): LoRA fine-tuning of stories260K in the engine worker on
// 200 lines about "Zorbu the otter" (tests/data/zorbu), st and mt builds:
// the validation loss halves; Kiln's own greedy generation from "Once upon a
// time" with the adapter (loadModel(src, {lora})) names Zorbu and the base
// model's does not; and llama.cpp (node-llama-cpp 3.21.1) loading
// stories260K + the adapter trained here in wasm names Zorbu too.
// LoRA dropout: 0 gives the adapter of a run without the option, byte for
// byte; > 0 another one, the same for the same seed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { getLlama } from 'node-llama-cpp';
import { KilnAbortError, KilnError, type Kiln, type Model } from '../../js/dist/index.js';
import { BUILDS, MODEL, engine } from './helpers.js';

const DATA = readFileSync(new URL('../data/zorbu/zorbu.txt', import.meta.url).pathname, 'utf8');

/** the GGUF's string value of a key, read by hand (version 3, little-endian) */
function ggufString(b: Uint8Array, key: string): string | null {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const dec = new TextDecoder();
  const nkv = Number(dv.getBigUint64(16, true));
  let o = 24;
  const str = () => { const n = Number(dv.getBigUint64(o, true)); const s = dec.decode(b.subarray(o + 8, o + 8 + n)); o += 8 + n; return s; };
  for (let i = 0; i < nkv; i++) {
    const k = str();
    const type = dv.getUint32(o, true); o += 4;
    if (type === 8) { const v = str(); if (k === key) return v; }
    else if (type === 6) o += 4; // f32
    else throw new Error(`unexpected GGUF value type ${type} for ${k}`);
  }
  return null;
}

describe.each(BUILDS)('finetune (%s)', (build) => {
  let kiln: Kiln;
  let model: Model;
  beforeAll(async () => {
    kiln = await engine(build, build === 'mt' ? 2 : 1);
    model = await kiln.loadModel(MODEL);
  });
  afterAll(() => { model?.free(); kiln?.destroy(); });

  it('halves the validation loss and returns a llama.cpp LoRA adapter', async () => {
    const steps: number[] = [];
    const r = await model.finetune({
      data: DATA, rank: 8, alpha: 16, targets: ['q', 'v'], nCtx: 64, batchSize: 8, epochs: 3, lr: 2e-2, seed: 1,
      onProgress: (p) => { expect(Number.isFinite(p.loss)).toBe(true); steps.push(p.step); },
    });
    expect(r.steps).toBe(45);
    expect(steps).toEqual(Array.from({ length: 45 }, (_, i) => i + 1));
    expect(r.valLoss).toBeLessThan(r.valLossBefore / 2);
    console.log(`# finetune ${build}: validation loss ${r.valLossBefore.toFixed(4)} -> ${r.valLoss.toFixed(4)}`);
    expect(new TextDecoder().decode(r.adapter.subarray(0, 4))).toBe('GGUF');
    expect(ggufString(r.adapter, 'general.type')).toBe('adapter');
    expect(ggufString(r.adapter, 'adapter.type')).toBe('lora');
    expect(ggufString(r.adapter, 'general.architecture')).toBe('llama');
    // Kiln's own greedy generation with the adapter names Zorbu; the base model's does not
    const tuned = await kiln.loadModel(MODEL, { lora: [{ source: r.adapter.slice(), scale: 1 }] });
    try {
      const greedy = { maxTokens: 48, temperature: 0 };
      const withAdapter = await tuned.complete('Once upon a time', greedy);
      const base = await model.complete('Once upon a time', greedy);
      console.log(`# Kiln ${build} + adapter: Once upon a time${withAdapter.text}\n# Kiln ${build} base: Once upon a time${base.text}`);
      expect(withAdapter.text).toContain('Zorbu');
      expect(base.text).not.toContain('Zorbu');
    } finally { tuned.free(); }
    // llama.cpp with the adapter names Zorbu
    const dir = mkdtempSync(path.join(tmpdir(), 'kiln-finetune-'));
    try {
      const file = path.join(dir, 'zorbu.gguf');
      writeFileSync(file, r.adapter);
      const llama = await getLlama({ gpu: false, logLevel: 'error' as never });
      const lm = await llama.loadModel({ modelPath: MODEL });
      const ctx = await lm.createContext({ contextSize: 128, threads: 1, lora: { adapters: [{ filePath: file }] } });
      const seq = ctx.getSequence();
      const input = [lm.tokens.bos!, ...lm.tokenize('Once upon a time')];
      const greedy = { temperature: 0 };
      const first = await seq.controlledEvaluate(input.map((t, i) => (i === input.length - 1 ? [t, { generateNext: { token: true, options: greedy } }] as const : t)));
      const ids: number[] = [];
      let next = first[input.length - 1]?.next?.token;
      while (ids.length < 40 && next != null && !lm.isEogToken(next)) {
        ids.push(next);
        const s2 = await seq.controlledEvaluate([[next, { generateNext: { token: true, options: greedy } }]]);
        next = s2[0]?.next?.token;
      }
      const text = lm.detokenize(ids as never);
      console.log(`# llama.cpp + wasm-trained adapter (${build}): Once upon a time${text}`);
      expect(text).toContain('Zorbu');
      await ctx.dispose();
      await lm.dispose();
    } finally { rmSync(dir, { recursive: true, force: true }); }
    // the engine still generates afterwards
    const c = await model.complete('Once upon a time', { maxTokens: 4, temperature: 0 });
    expect(c.tokens.length).toBeGreaterThan(0);
  });

  it('dropout: 0 is the run without it, > 0 changes the adapter the same way for a seed', async () => {
    const data = DATA.split('\n').slice(0, 60).join('\n');
    const run = async (extra: { dropout?: number; seed?: number }) =>
      (await model.finetune({ data, nCtx: 32, batchSize: 4, epochs: 1, lr: 1e-2, valFraction: 0, seed: 3, ...extra })).adapter;
    const plain = await run({});
    const zero = await run({ dropout: 0 });
    const a = await run({ dropout: 0.25 });
    const b = await run({ dropout: 0.25 });
    const other = await run({ dropout: 0.25, seed: 4 });
    expect(Buffer.from(zero).equals(Buffer.from(plain))).toBe(true);
    expect(a.byteLength).toBe(plain.byteLength);
    expect(Buffer.from(a).equals(Buffer.from(plain))).toBe(false);
    expect(Buffer.from(b).equals(Buffer.from(a))).toBe(true);
    expect(Buffer.from(other).equals(Buffer.from(a))).toBe(false);
    await expect(model.finetune({ data, dropout: 1 })).rejects.toThrow(/dropout 1 must be in \[0, 1\)/);
  });

  it('stops on abort and refuses bad options with a message', async () => {
    const ac = new AbortController();
    const p = model.finetune({ data: DATA, nCtx: 32, batchSize: 2, epochs: 5, onProgress: (q) => { if (q.step === 2) ac.abort(); }, signal: ac.signal });
    await expect(p).rejects.toBeInstanceOf(KilnAbortError);
    await expect(model.finetune({ data: DATA, targets: ['q', 'zz'] })).rejects.toBeInstanceOf(KilnError);
    await expect(model.finetune({ data: DATA, nCtx: 4096 })).rejects.toThrow(/ctx 4096 out of range/);
    await expect(model.finetune({ data: '{"messages": [', chat: true, nCtx: 32 })).rejects.toThrow(/line 1/);
    await expect(model.finetune({ data: 'too short', nCtx: 64 })).rejects.toThrow(/fewer than one window/);
    // the engine is still usable
    const r = await model.finetune({ data: DATA, nCtx: 32, batchSize: 4, epochs: 1, valFraction: 0 });
    expect(r.steps).toBeGreaterThan(0);
  });
});
