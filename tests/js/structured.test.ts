// Structured output through the JS API, st and mt, on stories260K:
//  - jsonSchema and grammar: every schema of tests/data/json-schemas/ and every
//    GBNF grammar of tests/data/grammars/, greedy, token for token against the
//    native `kiln-generate --json-schema / --grammar-file` (whose grammar
//    sampler tests/oracle/grammar.mjs checks against llama.cpp's); schema
//    outputs parse and ajv validates them; sampled runs parse and validate too;
//  - logprobs: against log-softmax (double precision) of the logits the engine
//    sampled from, at every generated position, and of the native logits
//    (`kiln-logits`) within float noise;
//  - logitBias by id and by text: the reported log-probabilities equal
//    log-softmax(logits + bias), a banned text's tokens never appear;
//  - the options on a Session and in a stream; bad options name themselves.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { KilnError, type Kiln, type Model, type TokenLogprob } from '../../js/dist/index.js';
import { BUILDS, MODEL, engine } from './helpers.js';

const BIN = new URL('../../build/bin/', import.meta.url).pathname;
const DATA = new URL('../data/', import.meta.url).pathname;
const PROMPT = 'Once upon a time';
const N_MAX = 160;

const schemas = readdirSync(`${DATA}json-schemas`).filter((f) => f.endsWith('.json')).sort();
const grammars = readdirSync(`${DATA}grammars`).filter((f) => f.endsWith('.gbnf')).sort();

/** the native run's generated ids (greedy unless extra says otherwise) */
function nativeIds(source: string[], extra: string[] = []): number[] {
  const out = execFileSync(`${BIN}kiln-generate`, ['-m', MODEL, '-p', PROMPT, '--ctx', '512', '-n', String(N_MAX), '-t', '1',
    '--temp', '0', '--print-ids', ...source, ...extra], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  return out ? out.split(/\s+/).map(Number) : [];
}

/** log-softmax in double precision */
function logSoftmax(logits: ArrayLike<number>): Float64Array {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (v) => v - lse);
}

/** log-softmax of the native logits after ids (kiln-logits) */
function nativeLogprobs(ids: number[]): Float64Array {
  const out = execFileSync(`${BIN}kiln-logits`, ['-m', MODEL, '--ids', ids.join(','), '--ctx', '512'], { encoding: 'utf8', maxBuffer: 64 << 20 });
  return logSoftmax(JSON.parse(out.trim().split('\n').pop()!).logits);
}

/** the logits a session's last sample was drawn from (an internal method of the session) */
const logitsOf = (s: unknown) => (s as { lastLogits(): Promise<Float32Array> }).lastLogits();

function ajv() {
  const a = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (x: unknown) => void)(a);
  return a;
}

describe.each(BUILDS)('structured output (%s)', (build) => {
  let kiln: Kiln;
  let model: Model;
  beforeAll(async () => {
    kiln = await engine(build, build === 'mt' ? 2 : 1);
    model = await kiln.loadModel(MODEL, { nCtx: 512 });
  });
  afterAll(() => { model?.free(); kiln?.destroy(); });

  it(`jsonSchema: ${schemas.length} schemas, greedy, equal to kiln-generate --json-schema; JSON valid for the schema`, async () => {
    const validator = ajv();
    let ended = 0;
    for (const f of schemas) {
      const text = readFileSync(`${DATA}json-schemas/${f}`, 'utf8');
      const schema = JSON.parse(text);
      const r = await model.complete(PROMPT, { jsonSchema: schema, temperature: 0, maxTokens: N_MAX, cachePrompt: false });
      expect(r.tokens, f).toEqual(nativeIds(['--json-schema', `${DATA}json-schemas/${f}`]));
      // the same schema as JSON text: the same output
      if (f === schemas[0]) expect((await model.complete(PROMPT, { jsonSchema: text, temperature: 0, maxTokens: N_MAX })).tokens).toEqual(r.tokens);
      if (r.stopReason !== 'eos') continue; // cut at maxTokens: nothing to parse (counted below)
      ended++;
      const value = JSON.parse(r.text);
      const validate = validator.compile(schema);
      expect(validate(value), `${f}: ${r.text} ${JSON.stringify(validate.errors)}`).toBe(true);
    }
    // greedy stories260K rambles inside long strings on a few schemas; most end
    expect(ended).toBeGreaterThanOrEqual(Math.ceil(schemas.length * 0.75));
    console.log(`# ${build}: ${ended}/${schemas.length} greedy schema outputs ended and validate`);
  });

  it('jsonSchema: sampled runs (3 seeds x 2 temperatures) parse and validate', async () => {
    const validator = ajv();
    let n = 0;
    for (const f of ['person.json', 'enum-colors.json', 'int-array.json', 'anyof.json', 'nested.json', 'uuid.json']) {
      const schema = JSON.parse(readFileSync(`${DATA}json-schemas/${f}`, 'utf8'));
      const validate = validator.compile(schema);
      for (const seed of [1, 2, 3]) {
        for (const temperature of [0.8, 1.3]) {
          const r = await model.complete(PROMPT, { jsonSchema: schema, temperature, seed, maxTokens: 400 });
          expect(r.stopReason, `${f} seed ${seed} temp ${temperature}: ${r.text}`).toBe('eos');
          expect(validate(JSON.parse(r.text)), `${f}: ${r.text}`).toBe(true);
          n++;
        }
      }
    }
    expect(n).toBe(36);
  });

  it(`grammar: ${grammars.length} GBNF grammars, greedy, equal to kiln-generate --grammar-file`, async () => {
    for (const f of grammars) {
      const gbnf = readFileSync(`${DATA}grammars/${f}`, 'utf8');
      const r = await model.complete(PROMPT, { grammar: gbnf, temperature: 0, maxTokens: N_MAX });
      expect(r.tokens, f).toEqual(nativeIds(['--grammar-file', `${DATA}grammars/${f}`]));
    }
  });

  it('logprobs: log-softmax of the engine\'s logits (1e-5) at every position, top-N most likely first; native logits within 5e-3', async () => {
    const prompt = await model.tokenize(PROMPT);
    const s = model.session();
    const r = await s.complete(prompt, { temperature: 0, maxTokens: 8, logprobs: 5 });
    expect(r.logprobs!.length).toBe(8);
    let worst = 0, worstNative = 0;
    for (let i = 0; i < 8; i++) {
      const ids = [...prompt, ...r.tokens.slice(0, i)];
      // the same position again, one sampled token: the logits it was drawn from stay in the engine
      const one = await s.complete(ids, { temperature: 0, maxTokens: 1, logprobs: 5 });
      const ref = logSoftmax(await logitsOf(s));
      const e = one.logprobs![0];
      // the same as in the 8-token run to float noise (~1e-4 there: its prompt was evaluated as a batch, whose F32 products sum in another order)
      const g = r.logprobs![i];
      expect(e.top.map((t) => t.token)).toEqual(g.top.map((t) => t.token));
      for (let k = 0; k < 5; k++) expect(Math.abs(e.top[k].logprob - g.top[k].logprob)).toBeLessThan(1e-3);
      expect(e.token).toBe(r.tokens[i]);
      expect(e.text).toBe(await model.tokenToPiece(e.token, { special: true }));
      expect(e.top.length).toBe(5);
      expect(e.top[0].token).toBe(e.token); // greedy: the most likely
      expect(e.top.map((t) => t.token)).toEqual(Array.from(ref.keys()).sort((a, b) => ref[b] - ref[a]).slice(0, 5));
      worst = Math.max(worst, Math.abs(e.logprob - ref[e.token]), ...e.top.map((t) => Math.abs(t.logprob - ref[t.token])));
      // the native engine (other kernels, other summation order) agrees to float noise
      const nat = nativeLogprobs(ids);
      worstNative = Math.max(worstNative, ...e.top.map((t) => Math.abs(t.logprob - nat[t.token])));
    }
    s.free();
    console.log(`# ${build}: logprobs max |diff| vs log-softmax of the logits ${worst.toExponential(2)}, vs native ${worstNative.toExponential(2)}`);
    expect(worst).toBeLessThan(1e-5);
    expect(worstNative).toBeLessThan(5e-3);
  });

  it('logitBias by id and by text: log-probabilities of logits + bias; a banned text never appears', async () => {
    const prompt = await model.tokenize(PROMPT);
    const s = model.session();
    const plain = await s.complete(prompt, { temperature: 0, maxTokens: 1, logprobs: 3 });
    const first = plain.tokens[0];
    // ban the greedy choice and lift another token: the runner-up changes accordingly
    const lift = plain.logprobs![0].top[2].token;
    const r = await s.complete(prompt, { temperature: 0, maxTokens: 1, logprobs: 3, logitBias: { [first]: -Infinity, [lift]: 0.75 } });
    const logits = await logitsOf(s); // what that sample was drawn from, before the bias
    s.free();
    const biased = logSoftmax(Float64Array.from(logits, (v, t) => (t === first ? -Infinity : t === lift ? v + 0.75 : v)));
    const want = Array.from(biased.keys()).sort((a, b) => biased[b] - biased[a]).slice(0, 3);
    expect(r.tokens[0]).toBe(want[0]);
    expect(r.logprobs![0].top.map((t) => t.token)).toEqual(want);
    for (const t of r.logprobs![0].top) expect(Math.abs(t.logprob - biased[t.token])).toBeLessThan(1e-5);

    // a text: each of its tokens is banned, as a list of their ids would be
    const text = ' Lily was happy';
    const ids = await model.tokenize(text, { addBos: false });
    expect(ids.length).toBeGreaterThan(1);
    const byText = await model.complete(prompt, { temperature: 0, maxTokens: 60, logitBias: [[text, -Infinity]] });
    const byIds = await model.complete(prompt, { temperature: 0, maxTokens: 60, logitBias: ids.map((t) => [t, -Infinity] as [number, number]) });
    expect(byText.tokens).toEqual(byIds.tokens);
    for (const t of ids) expect(byText.tokens).not.toContain(t);
    const free = await model.complete(prompt, { temperature: 0, maxTokens: 60 });
    expect(ids.some((t) => free.tokens.includes(t))).toBe(true); // the ban changed something
  });

  it('a Session keeps its cache with a grammar; a stream reports logprobs per token', async () => {
    const s = model.session();
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 8 } }, required: ['name'] };
    const prompt = await model.tokenize(PROMPT);
    const a = await s.complete(prompt, { jsonSchema: schema, temperature: 0, maxTokens: 60 });
    const next = [...prompt, ...a.tokens, ...(await model.tokenize(' and then', { addBos: false }))];
    const b = await s.complete(next, { jsonSchema: schema, temperature: 0, maxTokens: 60 });
    // the cache holds the prompt and the reply, less its last token unless an end-of-text token followed it
    expect(a.stopReason).toBe('eos');
    expect(b.stats.cachedTokens).toBe(prompt.length + a.tokens.length);
    const fresh = model.session();
    expect((await fresh.complete(next, { jsonSchema: schema, temperature: 0, maxTokens: 60 })).tokens).toEqual(b.tokens);
    fresh.free();
    JSON.parse(b.text);

    const seen: TokenLogprob[] = [];
    const pieces: string[] = [];
    const it = s.generate(prompt, { temperature: 0, maxTokens: 12, logprobs: 2, onLogprobs: (e) => seen.push(e) });
    let res = await it.next();
    while (!res.done) { pieces.push(res.value); res = await it.next(); }
    const c = res.value!;
    expect(seen).toEqual(c.logprobs);
    expect(seen.map((e) => e.token)).toEqual(c.tokens);
    expect(pieces.join('')).toBe(c.text);
    // complete() sends them too
    const seen2: TokenLogprob[] = [];
    const d = await s.complete(prompt, { temperature: 0, maxTokens: 12, logprobs: 2, onLogprobs: (e) => seen2.push(e) });
    expect(seen2).toEqual(d.logprobs);
    expect(d.logprobs).toEqual(c.logprobs);
    s.free();
  });

  it('bad options: KilnError naming the option; the model stays usable', async () => {
    const bad = async (o: object, re: RegExp) => {
      const e = await model.complete(PROMPT, { maxTokens: 4, ...o }).catch((x) => x);
      expect(e).toBeInstanceOf(KilnError);
      expect(String(e.message)).toMatch(re);
    };
    await bad({ grammar: 'root ::= "a" |\nfoo ::= ( "b"' }, /grammar.*line 2.*column/);
    await bad({ grammar: 'root ::= nothing' }, /grammar.*nothing/);
    await bad({ grammar: 42 }, /grammar must be/);
    await bad({ jsonSchema: '{"type": "object", ' }, /jsonSchema.*line 1.*column/);
    await bad({ jsonSchema: 7 }, /jsonSchema must be/);
    await bad({ grammar: 'root ::= "a"', jsonSchema: {} }, /grammar and jsonSchema/);
    await bad({ logitBias: { 999999: 1 } }, /logit_bias.*999999.*outside the vocabulary/);
    await bad({ logitBias: { abc: 1 } }, /logitBias.*"abc"/);
    await bad({ logitBias: [[1, NaN]] }, /logitBias.*bias of 1/);
    await bad({ logitBias: [[1, Infinity]] }, /logitBias/);
    await bad({ logitBias: [['', 1]] }, /logitBias.*non-empty/);
    await bad({ logprobs: 65 }, /logprobs must be an integer in 0\.\.64/);
    await bad({ logprobs: 1.5 }, /logprobs/);
    const r = await model.complete(PROMPT, { temperature: 0, maxTokens: 4 });
    expect(r.tokens.length).toBe(4);
    expect(r.logprobs).toBeUndefined();
  });
});
