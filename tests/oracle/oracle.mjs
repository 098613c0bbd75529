// Cross-check Kiln's native llama runner against llama.cpp (node-llama-cpp,
// its prebuilt CPU build) on stories260K and the fixtures made by
// scripts/make-oracle-fixtures.sh: tokenization, the log-softmax of the
// first prompt positions, and 64 greedy tokens.
//
//   node tests/oracle/oracle.mjs [--build DIR] [--json FILE] [MODEL.gguf...]
//
// Prints one line per check, a table per model and "N passed, N failed";
// exits 1 when anything failed.
//
// llama.cpp's raw logits are not exposed by node-llama-cpp; with a greedy
// sampler it returns the softmax of the full, unmodified logit vector, so the
// logits are compared as log-probabilities (logit - logsumexp), which is the
// logit vector up to its (irrelevant) additive constant.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeOracle, loadOracleLlama, oracleIsaArgs } from "./llamacpp.mjs";
import { firstDiff, logSoftmax } from './compare.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
let buildDir = path.join(root, "build");
let jsonOut = null;
const modelArgs = [];
for (let i = 0; i < args.length; i++) {
    if (args[i] === "--build") buildDir = path.resolve(args[++i]);
    else if (args[i] === "--json") jsonOut = path.resolve(args[++i]);
    else modelArgs.push(path.resolve(args[i]));
}
const bin = (name) => path.join(buildDir, "bin", name);

const N_GEN = 64;
const N_LOGIT_POS = 4;
const STRICT = process.env.KILN_ORACLE_STRICT === "1";
// Two runs per model; tol(wt, pos) bounds max |log p_kiln - log p_llama|
// (tokens with p_llama > 1e-30) at prompt position pos.
//
//  kv-f32: F32 KV cache on both sides (llama.cpp without flash attention).
//  kv-f16: both defaults: F16 KV cache, flash attention (Kiln's flash
//    attention on F16 K/V rounds as ggml's CPU kernel does).
//
// What is left is summation order. stories260K is sensitive enough that a
// 1-ulp difference which moves one activation across an F16 or q8 rounding
// boundary ("a flip") shifts later log-probs by 5e-3 (F16 roundings) to 0.4
// (q8 activations): Kiln's own scalar and AVX2 kernels differ by the same
// amounts (tests/oracle/isa-cmp.mjs). Hence the F16 tolerance, and the known
// flips listed below.
const CONFIGS = [
    { name: "kv-f32", kiln: ["--kv-f32"], ctx: { flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" } },
    { name: "kv-f16", kiln: [], ctx: { flashAttention: true } },
];
const tolFor = (cfg, wt, pos) => (pos === 0 ? 1e-4 : wt === "f16" ? 3e-2 : wt === "f32" && cfg.name === "kv-f16" ? 1e-2 : 1e-4);
// Known greedy divergences: printed, not counted ("KNOWN-NOW-PASSES" when one
// goes away). [model, config, index into PROMPTS, why]
const KNOWN = [
    ["stories260K-pad-q4_0", "kv-f32", 3, "flip at token 52: in this configuration llama.cpp runs attention without flash attention (mul_mat + soft_max over an F32 cache); Kiln always runs flash attention, which sums in another order (with flash attention on, llama.cpp casts an F32 cache to F16, so there is no like-for-like F32 run)"],
];
const knownFor = (name, cfg, prompt) =>
    KNOWN.find(([m, c, i]) => m === name && c === cfg && PROMPTS[i] === prompt)?.[3];

const PROMPTS = [
    "Once upon a time",
    "The little dog",
    'Lily said, "Look at the big tree!"\nTom smiled; he was happy.',
    "Lily", // one token after BOS (checked below)
];
// tokenizer-only strings (no generation)
const TOKENIZE_ONLY = [
    "Once upon a time, there was a little girl named Lily.",
    " leading space",
    "two  spaces   three    four",
    "tabs\tand\nnew\n\nlines\n",
    "don't won't it's Lily's",
    "123 4567 89.5",
    "café naïve Zürich",
    "日本語 😀 ✓",
    "<s> and </s> stay text",
    "!!!???...,,,",
    "a",
    " ",
];

let passed = 0;
let failed = 0;
let knowns = 0;
function check(ok, name, detail = "") {
    if (ok) passed++;
    else failed++;
    console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? "  " + detail : ""}`);
    return ok;
}

function run(cmd, argv, input) {
    const r = spawnSync(cmd, argv, { input, encoding: "utf8", maxBuffer: 256 << 20 });
    if (r.error) throw r.error;
    if (r.status !== 0) throw new Error(`${path.basename(cmd)} ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
    return r.stdout;
}

function kilnTokenize(model, text) {
    const out = run(bin("kiln-tokenize"), ["-m", model], text).trim();
    return out === "" ? [] : out.split(/\s+/).map(Number);
}

function kilnGenerate(model, prompt, extra) {
    const out = run(bin("kiln-generate"), ["-m", model, "-p", prompt, "-n", String(N_GEN), "-t", "1",
        "--print-ids", "--print-logits", String(N_LOGIT_POS), ...oracleIsaArgs(), ...extra]);
    const lines = out.split("\n").filter((l) => l !== "");
    const logits = [];
    let ids = [];
    for (const l of lines) {
        if (l.startsWith("{")) logits.push(JSON.parse(l));
        else ids = l.trim().split(/\s+/).map(Number);
    }
    return { logits, ids };
}



function discoverModels() {
    if (modelArgs.length) return modelArgs;
    const list = [path.join(root, "models/stories260K.gguf")];
    const dir = path.join(root, "build/oracle");
    if (existsSync(dir)) {
        const order = ["f32", "f16", "q8_0", "q4_0"];
        const rank = (f) => { const i = order.findIndex((t) => f.endsWith(`-${t}.gguf`)); return i < 0 ? order.length : i; };
        const files = readdirSync(dir).filter((f) => f.endsWith(".gguf")).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
        for (const f of files) list.push(path.join(dir, f));
    }
    return list;
}

const llama = await loadOracleLlama();
console.log(describeOracle());
const models = discoverModels();
const summary = [];

// ---- tokenizer (the vocabulary is the same in every fixture; check the original and one fixture)
{
    const tokModels = [models[0], models.find((m) => /q4_0/.test(m))].filter(Boolean);
    for (const m of tokModels) {
        const lm = await llama.loadModel({ modelPath: m });
        const bos = lm.tokens.bos;
        for (const s of [...PROMPTS, ...TOKENIZE_ONLY]) {
            const want = [bos, ...lm.tokenize(s)];
            const got = kilnTokenize(m, s);
            const d = firstDiff(got, want);
            check(d < 0, `tokenize ${path.basename(m)} ${JSON.stringify(s)}`,
                d < 0 ? `(${want.length} tokens)` : `kiln [${got}] llama.cpp [${want}] first diff at ${d}`);
        }
        const one = lm.tokenize(PROMPTS[3]);
        check(one.length === 1, `one-token prompt ${JSON.stringify(PROMPTS[3])} is one token`, `[${one}]`);
        await lm.dispose();
    }
}

// ---- per model: prompt logits and greedy generation
for (const m of models) for (const cfg of CONFIGS) {
    const name = path.basename(m, ".gguf");
    const wt = /-(\w+)$/.test(name) ? name.replace(/^.*-/, "") : "f32";
    const lm = await llama.loadModel({ modelPath: m });
    const ctx = await lm.createContext({ contextSize: 256, batchSize: 256, threads: 1, sequences: 1, ...cfg.ctx });
    const seq = ctx.getSequence();
    const bos = lm.tokens.bos;
    const row = { model: name, config: cfg.name, prompts: PROMPTS.length, tokensMatched: 0, tokensTotal: 0, maxLogprobDiff: 0, genMatch: 0 };

    for (const prompt of PROMPTS) {
        const input = [bos, ...lm.tokenize(prompt)];
        const nlog = Math.min(N_LOGIT_POS, input.length);
        await seq.clearHistory();
        const greedy = { temperature: 0 };
        const res = await seq.controlledEvaluate(input.map((t, i) => {
            const probabilities = i < nlog;
            const token = i === input.length - 1;
            return probabilities || token ? [t, { generateNext: { probabilities, token, options: greedy } }] : t;
        }));
        const ref = [];
        let next = res[input.length - 1].next.token;
        while (ref.length < N_GEN && next != null && !lm.isEogToken(next)) {
            ref.push(next);
            if (ref.length === N_GEN) break;
            const r = await seq.controlledEvaluate([[next, { generateNext: { token: true, options: greedy } }]]);
            next = r[0].next.token;
        }

        const k = kilnGenerate(m, prompt, cfg.kiln);
        const tag = `${name} ${cfg.name} ${JSON.stringify(prompt)}`;

        // prompt tokens seen by Kiln's runner (the --print-logits lines) vs llama.cpp's
        const kt = k.logits.map((l) => l.token);
        check(firstDiff(kt, input.slice(0, nlog)) < 0 && k.logits.length === nlog, `prompt tokens ${tag}`, `kiln [${kt}] llama.cpp [${input.slice(0, nlog)}]`);

        let maxd = 0, over = false;
        const perPos = [];
        for (let p = 0; p < nlog && p < k.logits.length; p++) {
            const probs = res[p].next.probabilities;
            const kl = logSoftmax(k.logits[p].logits);
            let d = probs.size === kl.length ? 0 : Infinity;
            for (const [tok, pr] of probs) {
                if (pr > 1e-30) d = Math.max(d, Math.abs(Math.log(pr) - kl[tok]));
            }
            perPos.push(d);
            if (!(d <= tolFor(cfg, wt, p))) over = true;
            maxd = Math.max(maxd, d);
        }
        row.maxLogprobDiff = Math.max(row.maxLogprobDiff, maxd);
        row.maxLogprobDiffPos0 = Math.max(row.maxLogprobDiffPos0 ?? 0, perPos[0]);
        check(!over, `log-probs of first ${nlog} positions ${tag}`,
            `|diff| per position ${perPos.map((d) => d.toExponential(1)).join(" ")} (tol ${tolFor(cfg, wt, 0)}, then ${tolFor(cfg, wt, 1)})`);

        const d = firstDiff(k.ids, ref);
        const matched = d < 0 ? ref.length : d;
        row.tokensMatched += matched;
        row.tokensTotal += ref.length;
        if (d < 0) row.genMatch++;
        const detail = d < 0 ? `(${ref.length} tokens equal)`
            : `first diff at ${d}: kiln ${k.ids.slice(d, d + 5)} llama.cpp ${ref.slice(d, d + 5)} (kiln ${k.ids.length}, llama.cpp ${ref.length} tokens)`;
        const known = STRICT ? undefined : knownFor(name, cfg.name, prompt);
        if (known) {
            knowns++;
            console.log(`${d < 0 ? "KNOWN-NOW-PASSES" : "known"} greedy ${N_GEN} tokens ${tag}  ${detail}  [${known}]`);
        } else check(d < 0, `greedy ${N_GEN} tokens ${tag}`, detail);
        // --warmup (an evaluation of BOS, EOS, then an empty cache) changes
        // no logit and no token: the first prompt, first config of each model
        if (prompt === PROMPTS[0] && cfg === CONFIGS[0]) {
            const w = kilnGenerate(m, prompt, [...cfg.kiln, "--warmup"]);
            const same = firstDiff(w.ids, k.ids) < 0 && JSON.stringify(w.logits) === JSON.stringify(k.logits);
            check(same, `kiln-generate --warmup: same logits and ${k.ids.length} tokens ${tag}`,
                same ? "" : `ids ${w.ids.slice(0, 8)} vs ${k.ids.slice(0, 8)}`);
        }
    }
    summary.push(row);
    await ctx.dispose();
    await lm.dispose();
}

console.log(`\nmodel                      KV      prompts equal  tokens equal  max |dlogprob| pos 0 / pos 0..${N_LOGIT_POS - 1}`);
for (const r of summary) {
    console.log(`${r.model.padEnd(26)} ${r.config}  ${String(r.genMatch).padStart(5)}/${r.prompts}       ${String(r.tokensMatched).padStart(4)}/${r.tokensTotal}      ${r.maxLogprobDiffPos0.toExponential(1)} / ${r.maxLogprobDiff.toExponential(1)}`);
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ passed, failed, knowns, models: summary }, null, 1));
console.log(`\n${passed} passed, ${failed} failed` +
    (knowns ? `; ${knowns} greedy runs on the known-divergence list (KNOWN in tests/oracle/oracle.mjs; KILN_ORACLE_STRICT=1 counts them)` : ""));
await llama.dispose();
process.exit(failed ? 1 : 0);
