// Cross-check every decoder architecture Kiln runs against llama.cpp
// (node-llama-cpp 3.21.1, the ggml CPU variant pinned by llamacpp.mjs) on
// small random-weight models written by kiln-synth-model: per architecture
// and weight type, per prompt,
//
//  - the prompt token ids Kiln evaluates equal llama.cpp's;
//  - the log-probabilities after each of the first prompt tokens agree;
//  - 48 greedy tokens equal llama.cpp's. Where they first differ, both
//    engines' log-probs at that step are computed; when they agree within
//    DRIFT and the two picks are each other's runner-up (a near-tie that
//    summation order decides) the run passes compared up to that step, and
//    the step and both top-2 gaps are printed. Anything else fails
//    (tests/oracle/README.md).
//
// Prints one line per check and an architecture x type table of pass/fail;
// exits 1 when anything failed.
//
//   node tests/oracle/arch.mjs [--build DIR] [--json FILE] [--arch a,b] [--type f32,q8_0]
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeOracle, greedyOneByOne, loadOracleLlama, nextAfter, oracleIsaArgs } from "./llamacpp.mjs";
import { firstDiff, logSoftmax, maxLogprobDiff, parseGenerate, runTool as run } from './compare.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
let buildDir = path.join(root, "build");
let jsonOut = null;
let onlyArch = null;
let onlyType = null;
for (let i = 0; i < args.length; i++) {
    if (args[i] === "--build") buildDir = path.resolve(args[++i]);
    else if (args[i] === "--json") jsonOut = path.resolve(args[++i]);
    else if (args[i] === "--arch") onlyArch = args[++i].split(",");
    else if (args[i] === "--type") onlyType = args[++i].split(",");
}
const bin = (name) => path.join(buildDir, "bin", name);
const vocabDir = path.join(root, "tests/data/vocab");
const modelDir = path.join(buildDir, "oracle-arch");

// architecture -> the vocabulary its test model carries (SentencePiece for
// the llama and gemma families, byte-level BPE for the others)
const ARCHS = [
    ["llama", "llama-spm"], ["qwen3", "gpt-2"], ["gemma", "llama-spm"], ["gemma2", "llama-spm"],
    ["gemma3", "llama-spm"], ["granite", "gpt-2"], ["smollm3", "gpt-2"], ["olmo2", "gpt-2"],
].filter(([a]) => !onlyArch || onlyArch.includes(a));
const TYPES = onlyType ?? ["f32", "f16", "q8_0", "q4_K"];
const PROMPTS = [
    "Once upon a time",
    "The quick brown fox jumps over the lazy dog, and then it ran into the forest where",
];
const N_GEN = 48;
const N_LOGIT_POS = 4;
// max |log p_kiln - log p_llama.cpp| at prompt position 0 (one key in the
// cache) and at the later ones, as in oracle.mjs for llama.cpp's default
// configuration (F16 KV cache, flash attention): llama.cpp evaluates the
// prompt as one batch, Kiln's --print-logits one token at a time, and
// activations rounded to f16 / q8 blocks turn 1-ulp differences into
// 1e-3..1e-2 shifts of later log-probs (README.md)
const TOL = { f32: 3e-3, f16: 1e-3, q8_0: 1e-3, q4_K: 1e-3 };
// The Gemma family's GELU is ggml's table indexed by the f16 rounding of its
// input: a 1-ulp difference that moves an input across an f16 rounding
// boundary changes that activation by one f16 step (2^-11 relative), which
// shows as log-prob shifts of a few 1e-3.
const GELU_ARCHS = ["gemma", "gemma2", "gemma3"];
const tolAt = (arch, wt) => (GELU_ARCHS.includes(arch) ? 1e-2 : TOL[wt] ?? 1e-3);

// Greedy tokens may differ at a step where the two engines' log-probs agree
// within DRIFT (tokens with p > 1e-4) and the two picks are each other's
// runner-up on both sides: a near-tie that summation order decides.
const DRIFT = 5e-2;

// Weight types whose mat-vec Kiln does not yet sum in the pinned ggml
// variant's order: their failures are printed as "known", not counted
// (KILN_ORACLE_STRICT=1 counts them); the table says "known".
const KNOWN_TYPES = {
    q4_K: "llama.cpp's haswell build repacks Q4_K weights (q4_K 8x8 interleave, q8_K activations in 4-row blocks) and sums in that order; Kiln's q4_K mat-vec follows the plain vec_dot order, so q8_K rounding flips shift later log-probs by up to ~0.3",
};
const STRICT = process.env.KILN_ORACLE_STRICT === "1";

let passed = 0;
let failed = 0;
let knowns = 0;
let knownType = null; // the KNOWN_TYPES entry of the model under test
function check(ok, name, detail = "") {
    if (!ok && knownType && !STRICT) {
        knowns++;
        console.log(`known ${name}${detail ? "  " + detail : ""}  [${knownType}]`);
        return ok;
    }
    if (ok) passed++;
    else failed++;
    console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? "  " + detail : ""}`);
    return ok;
}

function kilnGenerate(model, prompt) {
    const out = run(bin("kiln-generate"), ["-m", model, "-p", prompt, "-n", String(N_GEN), "-t", "1", "--ctx", "256", "--batch", "1",
        "--print-ids", "--print-logits", String(N_LOGIT_POS), ...oracleIsaArgs()]);
    return parseGenerate(out);
}

function kilnLogits(model, ids) {
    const out = run(bin("kiln-logits"), ["-m", model, "--ctx", "256", "--ids", ids.join(","), ...oracleIsaArgs()]);
    return JSON.parse(out).logits;
}



const top2 = (probs) => { // [[token, p], [token, p]] of a Map token -> p
    let a = [-1, 0], b = [-1, 0];
    for (const [t, p] of probs) {
        if (p > a[1]) { b = a; a = [t, p]; } else if (p > b[1]) b = [t, p];
    }
    return [a, b];
};

mkdirSync(modelDir, { recursive: true });
const llama = await loadOracleLlama();
console.log(describeOracle());
const table = {};

for (const [arch, vocab] of ARCHS) for (const wt of TYPES) {
    const file = path.join(modelDir, `${arch}-${wt}.gguf`);
    run(bin("kiln-synth-model"), [file, "--arch", arch, "--type", wt, "--vocab", path.join(vocabDir, `ggml-vocab-${vocab}.gguf`)]);
    const lm = await llama.loadModel({ modelPath: file });
    const ctx = await lm.createContext({ contextSize: 256, batchSize: 256, threads: 1, sequences: 1, flashAttention: true });
    const seq = ctx.getSequence();
    const before = failed, knownBefore = knowns;
    knownType = KNOWN_TYPES[wt] ?? null;
    const cell = { tokens: 0, total: 0, maxLogprobDiff: 0, nearTies: [] };

    for (const prompt of PROMPTS) {
        const tag = `${arch} ${wt} ${JSON.stringify(prompt.slice(0, 24))}`;
        const input = [...(lm.tokens.shouldPrependBosToken ? [lm.tokens.bos] : []), ...lm.tokenize(prompt)];
        const nlog = Math.min(N_LOGIT_POS, input.length);
        // the prompt one token at a time on both sides (kiln-generate
        // --print-logits and --batch 1), so that every step runs the
        // mat-vec path whose summation order Kiln mirrors; log-probs after
        // each of the first prompt tokens, then llama.cpp's greedy tokens
        const { probs: single, ids: ref } = await greedyOneByOne(seq, input, N_GEN, nlog, (t) => lm.isEogToken(t));
        // the distribution llama.cpp picked its token d from, rebuilt the same way
        const distAt = (d) => nextAfter(seq, [...input, ...ref.slice(0, d)]);

        const k = kilnGenerate(file, prompt);
        const kt = k.logits.map((l) => l.token);
        check(firstDiff(kt, input.slice(0, nlog)) < 0 && kt.length === nlog, `prompt tokens ${tag}`,
            `kiln [${kt}] llama.cpp [${input.slice(0, nlog)}]`);

        let maxd = 0;
        const perPos = [];
        for (let p = 0; p < nlog && p < k.logits.length; p++) {
            const d = maxLogprobDiff(single[p], logSoftmax(k.logits[p].logits));
            perPos.push(d);
            maxd = Math.max(maxd, d);
        }
        cell.maxLogprobDiff = Math.max(cell.maxLogprobDiff, maxd);
        check(perPos.every((x) => x <= tolAt(arch, wt)), `log-probs of first ${nlog} positions ${tag}`,
            `|diff| per position ${perPos.map((x) => x.toExponential(1)).join(" ")} (tol ${tolAt(arch, wt)})`);

        const d = firstDiff(k.ids, ref);
        if (d < 0) {
            cell.tokens += ref.length;
            cell.total += ref.length;
            check(ref.length === N_GEN, `greedy ${N_GEN} tokens ${tag}`, `(${ref.length} tokens equal)`);
            continue;
        }
        cell.tokens += d;
        cell.total += ref.length;
        // the step where the two differ: both engines' log-probs there
        const at = d < ref.length && d < k.ids.length ? await distAt(d) : null;
        let nearTie = false;
        let detail = `first diff at ${d}: kiln ${k.ids.slice(d, d + 4)} llama.cpp ${ref.slice(d, d + 4)}`;
        if (at) {
            const kl = logSoftmax(kilnLogits(file, [...input, ...ref.slice(0, d)]));
            const ll = new Float64Array(kl.length).fill(-Infinity);
            for (const [t, p] of at.probabilities) ll[t] = Math.log(p);
            const a = ref[d], b = k.ids[d];
            let drift = 0;
            for (let t = 0; t < kl.length; t++) if (ll[t] > Math.log(1e-4)) drift = Math.max(drift, Math.abs(kl[t] - ll[t]));
            const [[l1], [l2]] = top2(at.probabilities);
            const kTop = [...kl.keys()].sort((x, y) => kl[y] - kl[x]).slice(0, 2);
            nearTie = at.token === a && l1 === a && l2 === b && kTop[0] === b && kTop[1] === a && drift <= DRIFT;
            detail += `; llama.cpp top-2 ${l1} ${l2} (log-prob gap ${(ll[a] - ll[b]).toExponential(2)}), ` +
                `Kiln top-2 ${kTop[0]} ${kTop[1]} (gap ${(kl[b] - kl[a]).toExponential(2)}), ` +
                `max |dlogprob| there ${drift.toExponential(2)} (near-tie limit ${DRIFT})`;
        }
        if (nearTie) {
            cell.nearTies.push({ prompt, step: d });
            check(true, `greedy tokens ${tag} equal up to a near-tie`, detail);
        } else check(false, `greedy ${N_GEN} tokens ${tag}`, detail);
    }
    cell.pass = failed === before;
    cell.known = knowns > knownBefore;
    (table[arch] ??= {})[wt] = cell;
    await ctx.dispose();
    await lm.dispose();
}

console.log(`\n${"arch".padEnd(9)}${TYPES.map((t) => t.padEnd(22)).join("")}  (tokens equal / llama.cpp's; * near-tie)`);
for (const [arch] of ARCHS) {
    const cells = TYPES.map((t) => {
        const c = table[arch][t];
        return `${!c.pass ? "FAIL" : c.known ? "known" : "pass"} ${c.tokens}/${c.total}${c.nearTies.length ? "*" : ""}`.padEnd(22);
    });
    console.log(`${arch.padEnd(9)}${cells.join("")}`);
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ passed, failed, knowns, table }, null, 1));
console.log(`\n${passed} passed, ${failed} failed` +
    (knowns ? `; ${knowns} failures of known-divergent types not counted (KNOWN_TYPES in tests/oracle/arch.mjs; KILN_ORACLE_STRICT=1 counts them)` : ""));
await llama.dispose();
process.exit(failed ? 1 : 0);
