// Text generation in Node, st and mt: stories260K greedy against llama.cpp's
// reference text (models/README.md), tokenization, seeded sampling, stop
// strings, abort then reuse, a prompt longer than the context.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KilnAbortError, KilnError, type Kiln, type Model } from '../../js/dist/index.js';
import { BUILDS, MODEL, engine } from './helpers.js';

// the text after "<s> " in the README's reference block
function reference(): string {
  const readme = readFileSync(new URL('../../models/README.md', import.meta.url), 'utf8');
  const m = /```\n<s> (Once upon a time[\s\S]*?)\n```/.exec(readme);
  if (!m) throw new Error('no reference block in models/README.md');
  return m[1];
}
const REF = reference();
const PROMPT = 'Once upon a time';
const GREEDY = { maxTokens: 200, temperature: 0 };

describe.each(BUILDS)('text generation (%s)', (build) => {
  let kiln: Kiln;
  let model: Model;
  beforeAll(async () => {
    kiln = await engine(build, build === 'mt' ? 2 : 1);
    model = await kiln.loadModel(MODEL);
  });
  afterAll(() => { model?.free(); kiln?.destroy(); });

  it('tokenizes like llama.cpp, and back', async () => {
    const text = 'Once upon a time, there was a little girl named Lily.';
    const ids = await model.tokenize(text, { addBos: true });
    expect(ids.join(' ')).toBe('1 403 407 261 378 432 383 286 261 376 298 315 421 395 317 426');
    expect((await model.tokenize(text, { addBos: false }))[0]).toBe(403);
    expect(await model.detokenize(ids.slice(1))).toBe(text);
    expect(await model.tokenToPiece(403)).toBe(' Once');
  });

  it('greedy, 200 tokens: llama.cpp\'s reference text via generate()', async () => {
    const pieces: string[] = [];
    for await (const p of model.generate(PROMPT, GREEDY)) pieces.push(p);
    expect(pieces.length).toBeGreaterThan(50); // streamed, not one block
    expect(PROMPT + pieces.join('')).toBe(REF);
    const s = model.lastStats!;
    expect(s.promptTokens).toBe(5);
    expect(s.generatedTokens).toBe(200);
    console.log(`# stories260K ${build}: prompt ${s.promptTokensPerSecond.toFixed(0)} tok/s, generation ${s.tokensPerSecond.toFixed(0)} tok/s`);
  });

  it('greedy, 200 tokens: the same via complete(), with token ids', async () => {
    const r = await model.complete(PROMPT, GREEDY);
    expect(PROMPT + r.text).toBe(REF);
    expect(r.tokens.length).toBe(200);
    expect(r.stopReason).toBe('maxTokens');
    expect(await model.detokenize([...(await model.tokenize(PROMPT, { addBos: false })), ...r.tokens])).toBe(REF);
    expect(r.stats.generatedTokens).toBe(200);
    expect(r.stats.tokensPerSecond).toBeGreaterThan(0);
  });

  it('sampling: the same seed gives the same text, another seed another', async () => {
    const o = { maxTokens: 60, temperature: 1.0, topK: 40, topP: 0.95, seed: 1234 };
    const a = await model.complete(PROMPT, o);
    const b = await model.complete(PROMPT, o);
    const c = await model.complete(PROMPT, { ...o, seed: 99 });
    expect(b.text).toBe(a.text);
    expect(b.tokens).toEqual(a.tokens);
    expect(c.tokens).not.toEqual(a.tokens);
    expect(PROMPT + a.text).not.toBe(REF.slice(0, PROMPT.length + a.text.length)); // really sampled
  });

  it('stop strings end the text before them', async () => {
    const r = await model.complete(PROMPT, { ...GREEDY, stop: ['Lily.'] });
    expect(r.stopReason).toBe('stop');
    expect(PROMPT + r.text).toBe(REF.slice(0, REF.indexOf('Lily.')));
    const pieces: string[] = [];
    for await (const p of model.generate(PROMPT, { ...GREEDY, stop: ['park', 'nothing like this'] })) pieces.push(p);
    expect(PROMPT + pieces.join('')).toBe(REF.slice(0, REF.indexOf('park')));
    await expect(model.complete(PROMPT, { stop: [''] })).rejects.toThrow(/stop strings/);
  });

  it('abort mid-generation, then a new generation gives the reference again', async () => {
    const ctl = new AbortController();
    let n = 0;
    await expect((async () => {
      for await (const _ of model.generate(PROMPT, { ...GREEDY, signal: ctl.signal })) { if (++n === 10) ctl.abort(); }
    })()).rejects.toBeInstanceOf(KilnAbortError);
    expect(n).toBe(10); // no piece after the abort
    // breaking out of the loop cancels too
    for await (const _ of model.generate(PROMPT, GREEDY)) break;
    const r = await model.complete(PROMPT, GREEDY);
    expect(PROMPT + r.text).toBe(REF);
  });

  it('a prompt longer than the context is a KilnError naming the sizes', async () => {
    const long = 'Once upon a time there was a cat. '.repeat(80);
    const err = await model.complete(long, { maxTokens: 4 }).catch((e) => e);
    expect(err).toBeInstanceOf(KilnError);
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.message).toMatch(/prompt has \d+ tokens.*context of 512 tokens/);
    // still usable
    expect(PROMPT + (await model.complete(PROMPT, GREEDY)).text).toBe(REF);
  });

  it('bad options are rejected before anything runs', async () => {
    await expect(model.complete(PROMPT, { temperature: -1 })).rejects.toThrow(/temperature/);
    await expect(model.complete(PROMPT, { seed: 1.5 })).rejects.toThrow(/seed/);
    await expect(model.detokenize([100000])).rejects.toThrow(/outside the vocabulary/);
  });

  it('chat: no template in the file, ChatML fallback; vocabOnly loads tokenize', async () => {
    const t = await model.applyChatTemplate([{ role: 'user', content: 'Hi' }]);
    expect(t.text).toBe('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    const j = await model.applyChatTemplate([{ role: 'user', content: 'Hi' }], '{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}');
    expect(j.text).toBe('<s>[user] Hi\n');
    expect(j.addBos).toBe(false);
    const r = await model.chat([{ role: 'user', content: 'Once upon a time' }], { maxTokens: 8, temperature: 0 });
    expect(r.tokens.length).toBeLessThanOrEqual(8);
    const v = await kiln.loadModel(MODEL, { vocabOnly: true });
    expect((await v.tokenize('Once upon a time')).join(' ')).toBe('1 403 407 261 378');
    v.free();
  });
});
