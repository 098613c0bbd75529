// Sessions and structured output in wasm (kiln-st, 1 thread, Node), one JSON
// line per measurement; compare as ratios within one run.
//
//  - "chat_turn2": a chat's second turn on the session that ran the first
//    (KV cache reused: only the new ids are evaluated) against the same
//    conversation on a fresh session (cold: all of it evaluated). The same
//    ids as bench-session (native): turn 1 = BOS + 300 + (i*37) % 200, a
//    greedy reply, then new ids.
//  - "grammar_cost": ms per generated token without constraint, with
//    llama.cpp's json.gbnf grammar and with a JSON Schema (jsonSchema), greedy
//    and temperature 0.8 / top-k 40, on the synthetic 2048-wide model
//    (bench/peers/make-models.sh; 32000-token vocabulary) or --grammar-model
//    (a 152k vocabulary: bench-make_synthetic --vocab-size 151936). Per
//    round the three constraints run back to back for each sampling, so a
//    round's ratios share the machine's load (printed with every line).
//
//   node bench/chat.mjs [--models A.gguf,B.gguf | --models none] [--grammar-model FILE] [--reps N] [--gen N]
import { readFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
const reps = Number(arg('--reps', 3));
const nGen = Number(arg('--gen', 24));
const chatModels = arg('--models', [path.join(root, 'models/stories260K.gguf'), path.join(root, 'bench/peers/data/synth-q4_0.gguf')].join(','))
  .split(',').filter((f) => f && f !== 'none');
const grammarModel = arg('--grammar-model', path.join(root, 'bench/peers/data/synth-q4_0.gguf'));
const cpu = os.cpus()[0]?.model ?? 'unknown';
const load = () => os.loadavg().map((x) => +x.toFixed(2));
const out = (o) => console.log(JSON.stringify({ engine: 'wasm', build: 'kiln-st', threads: 1, cpu, ...o, loadavg: load() }));
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
const rel = (f) => path.relative(root, f);

const { Kiln } = await import(path.join(root, 'js/dist/index.js'));
const kiln = await Kiln.create({ build: 'st', threads: 1, logLevel: 'error' });

// ---- turn 2 with the cache vs cold (as bench/session.c: 200 + 32 + 24 ids)
const N1 = 200, NR = 32, N2 = 24;
for (const file of chatModels) {
  if (!existsSync(file)) { out({ what: 'chat_turn2', model: rel(file), error: 'missing (bash bench/peers/make-models.sh)' }); continue; }
  const model = await kiln.loadModel(file);
  const bos = (await model.tokenize('', { addBos: true }))[0];
  const turn1 = [bos, ...Array.from({ length: N1 - 1 }, (_, i) => 300 + ((i + 1) * 37) % 200)];
  const fresh = Array.from({ length: N2 }, (_, i) => 300 + ((N1 + NR + i + 7) * 53) % 200);
  const opts = { maxTokens: NR, temperature: 0 };
  const cached = [], cold = [], cachedPrompt = [], coldPrompt = [];
  let stats;
  for (let r = 0; r < reps; r++) {
    const s = model.session();
    const t1 = await s.complete(turn1, opts);
    const reply = [...t1.tokens, ...fresh].slice(0, NR);
    while (reply.length < NR) reply.push(300 + reply.length);
    const conv = [...turn1, ...reply, ...fresh];
    let t0 = performance.now();
    const a = await s.complete(conv, opts);
    cached.push(performance.now() - t0);
    cachedPrompt.push((a.stats.promptTokens - a.stats.cachedTokens) / a.stats.promptTokensPerSecond * 1000);
    s.free();
    const c = model.session();
    t0 = performance.now();
    const b = await c.complete(conv, opts);
    cold.push(performance.now() - t0);
    coldPrompt.push(b.stats.promptTokens / b.stats.promptTokensPerSecond * 1000);
    c.free();
    stats = { turn2_prompt_tokens: a.stats.promptTokens, cached_tokens: a.stats.cachedTokens, evaluated_cached: a.stats.promptTokens - a.stats.cachedTokens,
      evaluated_cold: b.stats.promptTokens - b.stats.cachedTokens, reply_tokens: a.tokens.length };
  }
  const [pc, pw, tc, tw] = [median(cachedPrompt), median(coldPrompt), median(cached), median(cold)];
  out({ what: 'chat_turn2', model: rel(file), ...stats, prompt_ms_cached: +pc.toFixed(2), prompt_ms_cold: +pw.toFixed(2),
    turn_ms_cached: +tc.toFixed(2), turn_ms_cold: +tw.toFixed(2), prompt_speedup: +(pw / pc).toFixed(2), turn_speedup: +(tw / tc).toFixed(2), reps });
  model.free();
}

// ---- grammar / JSON Schema cost per token
const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 40 }, age: { type: 'integer', minimum: 0 }, email: { type: 'string', format: 'uuid' },
    tags: { type: 'array', items: { type: 'string' }, maxItems: 8 }, active: { type: 'boolean' },
  },
  required: ['name', 'age', 'tags'],
};
if (!existsSync(grammarModel)) {
  out({ what: 'grammar_cost', model: rel(grammarModel), error: 'missing (bash bench/peers/make-models.sh)' });
} else {
  const model = await kiln.loadModel(grammarModel);
  const vocab = model.metadata['tokenizer.ggml.tokens']?.length ?? null;
  const gbnf = readFileSync(path.join(root, 'tests/data/grammars/json.gbnf'), 'utf8');
  const SAMPLING = { greedy: { temperature: 0 }, 'temp0.8-topk40': { temperature: 0.8, topK: 40, topP: 1, seed: 7 } };
  const CONSTRAINTS = { none: {}, grammar: { grammar: gbnf }, jsonSchema: { jsonSchema: SCHEMA } };
  await model.complete('Hi', { maxTokens: 2, temperature: 0 });
  const ms = {}; // sampling -> constraint -> ms per token, one per round
  const tokens = {};
  for (let r = 0; r < reps; r++) {
    for (const [sname, sopts] of Object.entries(SAMPLING)) {
      ms[sname] ??= {};
      const round = {};
      for (const [cname, copts] of Object.entries(CONSTRAINTS)) {
        const s = model.session();
        const c = await s.complete('Here is the record:', { maxTokens: nGen, ...sopts, ...copts });
        s.free();
        round[cname] = 1000 / c.stats.tokensPerSecond;
        (ms[sname][cname] ??= []).push(round[cname]);
        tokens[`${sname}/${cname}`] = c.stats.generatedTokens;
      }
      out({ what: 'grammar_round', round: r, sampling: sname, ms_per_token: Object.fromEntries(Object.entries(round).map(([k, v]) => [k, +v.toFixed(3)])),
        grammar_pct: +((round.grammar / round.none - 1) * 100).toFixed(1), jsonSchema_pct: +((round.jsonSchema / round.none - 1) * 100).toFixed(1) });
    }
  }
  for (const sname of Object.keys(SAMPLING)) {
    const base = median(ms[sname].none);
    for (const cname of ['grammar', 'jsonSchema']) {
      // the median of the per-round ratios (each round's runs back to back)
      const ratios = ms[sname][cname].map((v, i) => v / ms[sname].none[i]);
      out({ what: 'grammar_cost', model: rel(grammarModel), vocab, sampling: sname, constraint: cname, tokens: tokens[`${sname}/${cname}`],
        ms_per_token_base: +base.toFixed(3), ms_per_token: +median(ms[sname][cname]).toFixed(3),
        added_pct: +((median(ratios) - 1) * 100).toFixed(1), added_pct_rounds: ratios.map((x) => +((x - 1) * 100).toFixed(1)), reps });
    }
  }
  model.free();
}
kiln.destroy();
