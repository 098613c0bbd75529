// Prompt caching and sessions, st and mt: a model's default session keeps
// its KV cache between calls, so turn 2 and 3 of a conversation evaluate
// only the new tokens (stats.cachedTokens), and every reply equals the reply
// of a fresh session (its own, empty KV cache) given the same whole
// conversation, token for token. model.session() is independent of the
// default session and of other sessions; its KV cache shows in kiln.memory().
// contextShift lets a generation run past the context.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kiln, Model } from '../../js/dist/index.js';
import { BUILDS, MODEL, engine } from './helpers.js';

const GREEDY = { maxTokens: 20, temperature: 0 };

describe.each(BUILDS)('prompt caching and sessions (%s)', (build) => {
  let kiln: Kiln;
  let model: Model;
  beforeAll(async () => {
    kiln = await engine(build, build === 'mt' ? 2 : 1);
    model = await kiln.loadModel(MODEL);
  });
  afterAll(() => { model?.free(); kiln?.destroy(); });

  it('turns 2 and 3 evaluate only the new tokens; replies equal a fresh session\'s', async () => {
    const user = ['Once upon a time', ' One day, Lily went to the park.', ' She saw a big dog.'];
    let conv: number[] = [];
    let prevEnd = 0;
    for (let k = 0; k < 3; k++) {
      conv = conv.concat(await model.tokenize(user[k], { addBos: k === 0 }));
      const warm = await model.complete(conv, GREEDY);
      const fresh = model.session();
      const cold = await fresh.complete(conv, GREEDY);
      fresh.free();
      expect(warm.tokens).toEqual(cold.tokens);
      expect(warm.text).toBe(cold.text);
      expect(warm.stats.promptTokens).toBe(conv.length);
      expect(cold.stats.cachedTokens).toBe(0);
      // the reply's last token was sampled but never evaluated: it is not in the cache
      expect(warm.stats.cachedTokens).toBe(k === 0 ? 0 : prevEnd - 1);
      conv = conv.concat(warm.tokens);
      prevEnd = conv.length;
    }
    // an edit in the middle: the ids before it are reused, nothing after
    const edited = conv.slice();
    edited[9] = edited[9] === 300 ? 301 : 300;
    const warm = await model.complete(edited, GREEDY);
    const fresh = model.session();
    const cold = await fresh.complete(edited, GREEDY);
    fresh.free();
    expect(warm.stats.cachedTokens).toBe(9);
    expect(warm.tokens).toEqual(cold.tokens);
    // cachePrompt false: the whole prompt evaluated, the same reply
    const whole = await model.complete(edited, { ...GREEDY, cachePrompt: false });
    expect(whole.stats.cachedTokens).toBe(0);
    expect(whole.tokens).toEqual(cold.tokens);
  });

  it('chat(): the second turn reuses the first one\'s prompt and reply', async () => {
    const s = model.session();
    const msgs = [{ role: 'user', content: 'Tell me a story.' }];
    const r1 = await s.chat(msgs, GREEDY);
    const t1 = await model.applyChatTemplate(msgs);
    const n1 = (await model.tokenize(t1.text, { addBos: t1.addBos, special: true })).length;
    const msgs2 = [...msgs, { role: 'assistant', content: r1.text }, { role: 'user', content: 'And then?' }];
    const r2 = await s.chat(msgs2, GREEDY);
    const fresh = model.session();
    const c2 = await fresh.chat(msgs2, GREEDY);
    expect(r2.stats.cachedTokens).toBeGreaterThanOrEqual(n1);
    expect(r2.tokens).toEqual(c2.tokens);
    s.free();
    fresh.free();
  });

  it('sessions are independent; each KV cache is in kiln.memory() until free()', async () => {
    const a = model.session(), b = model.session();
    const pa = await model.tokenize('Once upon a time');
    const pb = await model.tokenize('The big dog');
    await a.complete(pa, GREEDY);
    const before = (await kiln.memory()).used;
    const rb = await b.complete(pb, GREEDY); // b's cache is made here
    const after = (await kiln.memory()).used;
    const md = model.metadata;
    const nCtx = Math.min(4096, Math.max(512, Number(md['llama.context_length']))); // the engine's default context
    const layers = Number(md['llama.block_count']), heads = Number(md['llama.attention.head_count']);
    const kvHeads = Number(md['llama.attention.head_count_kv'] ?? heads);
    const kvBytes = 2 * layers * nCtx * (Number(md['llama.embedding_length']) / heads) * kvHeads * 2; // K and V, F16
    expect(after - before).toBeGreaterThanOrEqual(kvBytes);
    // a's cache still holds its prompt: b's generation did not disturb it
    const ra = await a.complete(pa, GREEDY);
    expect(ra.stats.cachedTokens).toBe(pa.length - 1);
    const rb2 = await b.complete(pb, GREEDY);
    expect(rb2.tokens).toEqual(rb.tokens);
    b.free();
    expect((await kiln.memory()).used).toBeLessThanOrEqual(after - kvBytes);
    await expect(b.complete(pb, GREEDY)).rejects.toMatchObject({ code: 'INVALID_HANDLE' });
    a.free();
  });

  it('saveState -> another engine -> loadState: the next turn equals going on without saving', async () => {
    const s = model.session();
    const p1 = await model.tokenize('Once upon a time');
    const r1 = await s.complete(p1, GREEDY);
    const state = await s.saveState();
    expect(state.byteLength).toBeGreaterThan(40);
    expect(new TextDecoder().decode(state.subarray(0, 4))).toBe('KKVS');
    const p2 = [...p1, ...r1.tokens, ...(await model.tokenize(' The next day', { addBos: false }))];
    const goOn = await s.complete(p2, GREEDY);
    s.free();

    const kiln2 = await engine(build, build === 'mt' ? 2 : 1);
    try {
      const model2 = await kiln2.loadModel(MODEL);
      const t = model2.session();
      await expect(t.loadState(state.subarray(0, state.byteLength - 1))).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/truncated/) });
      const other = state.slice();
      other[8] ^= 1;
      await expect(t.loadState(other)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/another model/) });
      await t.loadState(state);
      const resumed = await t.complete(p2, GREEDY);
      expect(resumed.stats.cachedTokens).toBe(goOn.stats.cachedTokens);
      expect(resumed.stats.cachedTokens).toBe(p1.length + r1.tokens.length - 1);
      expect(resumed.tokens).toEqual(goOn.tokens);
    } finally {
      kiln2.destroy();
    }
  });

  it('contextShift: a generation 3x the context goes on; without it stopReason is \'context\'', async () => {
    const small = await kiln.loadModel(MODEL, { nCtx: 64 });
    try {
      const on = await small.complete('Once upon a time', { maxTokens: 192, temperature: 0, contextShift: true });
      expect(on.stopReason).toBe('maxTokens');
      expect(on.tokens.length).toBe(192);
      const off = await small.complete('Once upon a time', { maxTokens: 192, temperature: 0 });
      expect(off.stopReason).toBe('context');
      expect(off.tokens.length).toBe(64 - 5 + 1);
      // until the first shift both runs are the same greedy text
      expect(on.tokens.slice(0, off.tokens.length - 1)).toEqual(off.tokens.slice(0, -1));
      await expect(small.complete('Once', { contextShift: true, nKeep: -1 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/n_keep/) });
    } finally {
      small.free();
    }
  });
});
