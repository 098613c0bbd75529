// Flash attention's other two paths in llama.cpp's CPU backend, against
// Kiln on stories260K with llama.cpp's defaults (F16 KV cache, flash
// attention):
//  - prompts of >= 64 ids, processed in one batch: ggml's tiled prompt path
//    (tiles of 64 query rows x 64 positions, f32 scores and accumulators).
//    The log-probs after the whole prompt (kiln-logits --batch N) and the
//    greedy continuation (kiln-generate --batch 512).
//  - decoding at n_kv >= 512 cached positions (llama.cpp's n_kv: the used
//    cells rounded up to 256, at most the context) with 2 threads: ggml's
//    split-KV decode path, whose result depends on the thread count. A
//    300-id prompt in a 512 context, 48 greedy ids at 2 threads on both
//    sides, and the log-probs after the prompt and all of them (kiln-logits
//    --threads 2, the prompt batched, the rest one by one).
//
//   node tests/oracle/fa-paths.mjs [--build DIR] [MODEL.gguf...]
//
// Default models: models/stories260K.gguf and build/oracle's q8_0 and q4_0
// fixtures. Tolerances as oracle.mjs's kv-f16 ones after position 0.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeOracle, loadOracleLlama, oracleIsaArgs } from "./llamacpp.mjs";
import { firstDiff, logSoftmax, runTool as run } from "./compare.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
let buildDir = path.join(root, "build");
const modelArgs = [];
for (let i = 0; i < args.length; i++) {
    if (args[i] === "--build") buildDir = path.resolve(args[++i]);
    else modelArgs.push(path.resolve(args[i]));
}
const bin = (name) => path.join(buildDir, "bin", name);

let passed = 0, failed = 0;
function check(ok, what, detail = "") {
    if (ok) passed++; else failed++;
    console.log(`${ok ? "ok  " : "FAIL"} ${what} ${detail}`);
}

const wtOf = (name) => (/-(\w+)$/.test(name) ? name.replace(/^.*-/, "") : "f32");
// oracle.mjs's kv-f16 tolerance after position 0
const tolFor = (wt) => (wt === "f16" ? 3e-2 : wt === "f32" ? 1e-2 : 1e-4);

const SENTENCES = [
    "Once upon a time, there was a little girl named Lily.",
    " She loved to play outside in the sun with her dog, Max.",
    " One day, she saw a big red ball in the park.",
    " She ran to the ball and kicked it very high.",
    " The ball flew over the tree and Lily laughed.",
    " Her mom called her home for lunch, and she ate a warm bowl of soup.",
    " After lunch, Lily and Max went back to the park to find the ball.",
    " They looked under the bench and behind the big tree.",
];
// the shortest run of SENTENCES (repeated) whose ids, BOS included, reach n
function textOf(lm, n) {
    let text = "";
    for (let i = 0; ; i++) {
        text += SENTENCES[i % SENTENCES.length];
        if (lm.tokenize(text).length + 1 >= n) return text;
    }
}

const models = modelArgs.length ? modelArgs : [
    path.join(root, "models/stories260K.gguf"),
    path.join(root, "build/oracle/stories260K-pad-q8_0.gguf"),
    path.join(root, "build/oracle/stories260K-pad-q4_0.gguf"),
].filter((m) => existsSync(m));

// whether kiln-logits takes --threads (a build before it did is thread-independent)
const logitsThreads = spawnSync(bin("kiln-logits"), [], { encoding: "utf8" }).stderr.includes("--threads");
function kilnLogits(m, ids, batch, ctx, threads) {
    const extra = threads > 1 && logitsThreads ? ["--threads", String(threads)] : [];
    const out = run(bin("kiln-logits"), ["-m", m, "--ids", ids.join(","), "--batch", String(batch), "--ctx", String(ctx), ...extra, ...oracleIsaArgs()]);
    return JSON.parse(out.trim().split("\n").pop()).logits;
}
function kilnGenerate(m, prompt, n, ctx, threads) {
    const out = run(bin("kiln-generate"), ["-m", m, "-p", prompt, "-n", String(n), "-t", String(threads), "--ctx", String(ctx),
        "--batch", "512", "--print-ids", ...oracleIsaArgs()]);
    return out.trim().split(/\s+/).filter((s) => s !== "").map(Number);
}
// max |log p_kiln - log p_llama| over tokens with p_llama > 1e-30
function maxDiff(probs, logits) {
    const kl = logSoftmax(logits);
    let d = probs.size === kl.length ? 0 : Infinity;
    for (const [tok, pr] of probs) if (pr > 1e-30) d = Math.max(d, Math.abs(Math.log(pr) - kl[tok]));
    return d;
}

const CASES = [
    { ids: 70, ctx: 256, threads: 1, gen: 32 },
    { ids: 150, ctx: 256, threads: 1, gen: 32 },
    { ids: 300, ctx: 512, threads: 2, gen: 48 },
];

const llama = await loadOracleLlama();
console.log(describeOracle());
const rows = [];
for (const m of models) {
    const name = path.basename(m, ".gguf"), wt = wtOf(name);
    const lm = await llama.loadModel({ modelPath: m });
    const bos = lm.tokens.bos;
    for (const c of CASES) {
        const text = textOf(lm, c.ids);
        const input = [bos, ...lm.tokenize(text)];
        const ctx = await lm.createContext({ contextSize: c.ctx, batchSize: c.ctx, threads: c.threads, sequences: 1, flashAttention: true });
        const seq = ctx.getSequence();
        const greedy = { temperature: 0 };
        const res = await seq.controlledEvaluate(input.map((t, i) =>
            i === input.length - 1 ? [t, { generateNext: { probabilities: true, token: true, options: greedy } }] : t));
        const probsPrompt = res[input.length - 1].next.probabilities;
        const ref = [];
        let next = res[input.length - 1].next.token, probsLast = null;
        while (ref.length < c.gen && next != null && !lm.isEogToken(next)) {
            ref.push(next);
            if (ref.length === c.gen) break;
            const last = ref.length === c.gen - 1;
            const r = await seq.controlledEvaluate([[next, { generateNext: { token: true, probabilities: last, options: greedy } }]]);
            next = r[0].next.token;
            if (last) probsLast = r[0].next.probabilities;
        }
        await ctx.dispose();

        const tag = `${name} ${input.length} ids ctx ${c.ctx} ${c.threads} thr`;
        const tol = tolFor(wt);
        const dPrompt = maxDiff(probsPrompt, kilnLogits(m, input, input.length, c.ctx, c.threads));
        check(dPrompt <= tol, `log-probs after the batched prompt ${tag}`, `max |dlogprob| ${dPrompt.toExponential(2)} (tol ${tol})`);
        let dLast = null;
        if (probsLast) {
            // after the prompt and ref[0..gen-2]: n_kv = 512 from 257 used positions on
            const ids = [...input, ...ref.slice(0, c.gen - 1)];
            dLast = maxDiff(probsLast, kilnLogits(m, ids, input.length, c.ctx, c.threads));
            check(dLast <= tol, `log-probs after ${ids.length} positions, decoded at ${c.threads} thr ${tag}`,
                `max |dlogprob| ${dLast.toExponential(2)} (tol ${tol})`);
        }
        const got = kilnGenerate(m, text, c.gen, c.ctx, c.threads);
        const d = firstDiff(got, ref);
        check(d < 0, `greedy ${ref.length} ids ${tag}`,
            d < 0 ? "(equal)" : `first diff at ${d}: kiln ${got.slice(d, d + 5)} llama.cpp ${ref.slice(d, d + 5)}`);
        rows.push({ tag, dPrompt, dLast, equal: d < 0 ? ref.length : d, of: ref.length });
    }
    await lm.dispose();
}
console.log("\ncase                                         prompt |dlogprob|  last |dlogprob|  greedy equal");
for (const r of rows) {
    console.log(`${r.tag.padEnd(44)} ${r.dPrompt.toExponential(2).padStart(10)}  ${(r.dLast == null ? "-" : r.dLast.toExponential(2)).padStart(16)}  ${String(r.equal).padStart(5)}/${r.of}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
