// LoRA adapters against llama.cpp (node-llama-cpp 3.21.1, the ggml CPU
// variant pinned by llamacpp.mjs): random-weight base models from
// kiln-synth-model and random adapters in llama.cpp's GGUF format from
// kiln-synth-lora. Per base model (architecture x weight type) and adapter
// set (one adapter at scale 1 and 0.5, two adapters at once, a Q8_0
// adapter):
//
//  - log-probabilities after each of the first prompt tokens of Kiln
//    base + adapters agree with llama.cpp base + adapters (lora context
//    option) within the tolerance arch.mjs uses for that weight type;
//  - N_GEN greedy tokens are equal (a step where the engines differ passes
//    only as a near-tie: both engines' picks are each other's runner-up and
//    their log-probs there agree within DRIFT, as in arch.mjs);
//  - the adapters change the output: Kiln's greedy tokens with them differ
//    from Kiln's without (so the comparison cannot pass with LoRA ignored);
//  - kiln-export-lora's merged model of an F32 base, run by llama.cpp,
//    gives llama.cpp's base + adapter tokens (near-ties as above: W x +
//    s B A x and (W + s B A) x round differently); that of a Q8_0 base (F16
//    weights, as llama.cpp's export-lora writes) gives the same tokens in
//    Kiln and in llama.cpp.
//
// Two adapters at once adapt disjoint weights: llama.cpp keeps its adapters
// in an unordered_map, so where two adapt one weight the order of the two
// additions (and so the rounding) is not defined.
//
//   node tests/oracle/lora.mjs [--build DIR] [--json FILE]
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeOracle, greedyOneByOne, loadOracleLlama, nextAfter, oracleIsaArgs } from "./llamacpp.mjs";
import { DRIFT, firstDiff, logSoftmax, mapLog, maxLogprobDiff, nearTie, parseGenerate, runTool as run } from "./compare.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
let buildDir = path.join(root, "build");
let jsonOut = null;
for (let i = 0; i < args.length; i++) {
    if (args[i] === "--build") buildDir = path.resolve(args[++i]);
    else if (args[i] === "--json") jsonOut = path.resolve(args[++i]);
}
const bin = (name) => path.join(buildDir, "bin", name);
const vocabDir = path.join(root, "tests/data/vocab");
const dir = path.join(buildDir, "oracle-lora");

const N_GEN = 32;
const N_LOGIT_POS = 4;
const PROMPT = "Once upon a time";
// as arch.mjs: max |log p_kiln - log p_llama.cpp| over the first positions
const TOL = { f32: 3e-3, q8_0: 1e-3 };
const GELU_ARCHS = ["gemma", "gemma2", "gemma3"];
const tolAt = (arch, wt) => (GELU_ARCHS.includes(arch) ? 1e-2 : TOL[wt]);

// base models: [arch, vocabulary, untied output (LoRA on output and token embedding)]
const BASES = [["llama", "llama-spm", true, ["f32", "q8_0"]], ["qwen3", "gpt-2", false, ["f32", "q8_0"]], ["gemma3", "llama-spm", false, ["f32"]]];

let passed = 0, failed = 0;
function check(ok, name, detail = "") {
    if (ok) passed++;
    else failed++;
    console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? "  " + detail : ""}`);
    return ok;
}

const loraArgs = (adapters) => adapters.flatMap((a) => ["--lora-scaled", a.file, String(a.scale)]);

function kilnGenerate(model, adapters) {
    const out = run(bin("kiln-generate"), ["-m", model, "-p", PROMPT, "-n", String(N_GEN), "-t", "1", "--ctx", "256", "--batch", "1",
        "--print-ids", "--print-logits", String(N_LOGIT_POS), ...loraArgs(adapters), ...oracleIsaArgs()]);
    return parseGenerate(out);
}

const kilnLogits = (model, adapters, ids) =>
    JSON.parse(run(bin("kiln-logits"), ["-m", model, "--ctx", "256", "--ids", ids.join(","), ...loraArgs(adapters), ...oracleIsaArgs()])).logits;

// llama.cpp with the adapters: the prompt one token at a time (the mat-vec
// path Kiln mirrors), log-probs after the first positions, greedy tokens
async function llamaGreedy(lm, adapters) {
    const ctx = await lm.createContext({ contextSize: 256, batchSize: 256, threads: 1, sequences: 1, flashAttention: true,
        ...(adapters.length ? { lora: { adapters: adapters.map((a) => ({ filePath: a.file, scale: a.scale })) } } : {}) });
    const seq = ctx.getSequence();
    const input = [...(lm.tokens.shouldPrependBosToken ? [lm.tokens.bos] : []), ...lm.tokenize(PROMPT)];
    const { probs, ids } = await greedyOneByOne(seq, input, N_GEN, N_LOGIT_POS, (t) => lm.isEogToken(t));
    // the distribution llama.cpp picked its token d from
    const distAt = async (d) => (await nextAfter(seq, [...input, ...ids.slice(0, d)])).probabilities;
    return { input, probs, ids, distAt, dispose: () => ctx.dispose() };
}

mkdirSync(dir, { recursive: true });
const llama = await loadOracleLlama();
console.log(describeOracle());
const table = [];

for (const [arch, vocab, untied, wtypes] of BASES) for (const wt of wtypes) {
    const base = path.join(dir, `${arch}-${wt}.gguf`);
    run(bin("kiln-synth-model"), [base, "--arch", arch, "--type", wt, "--vocab", path.join(vocabDir, `ggml-vocab-${vocab}.gguf`)]);
    const ad = (name, targets, type, seed, rank = 8) => {
        const file = path.join(dir, `${arch}-${wt}-${name}.gguf`);
        run(bin("kiln-synth-lora"), [file, "-m", base, "--targets", targets, "--type", type, "--seed", String(seed), "--rank", String(rank),
            "--alpha", String(2 * rank)]);
        return file;
    };
    const qv = ad("qv", untied ? "q,v,output,embd" : "q,v", "f32", 1);
    const rest = ad("rest", "k,o,gate,up,down", "f16", 2);
    const q8 = ad("q8", "q,k,v,o,gate,up,down", "q8_0", 3, 32);
    const SETS = [
        ["qv x1", [{ file: qv, scale: 1 }]],
        ["qv x0.5", [{ file: qv, scale: 0.5 }]],
        ["qv x1 + rest x0.75", [{ file: qv, scale: 1 }, { file: rest, scale: 0.75 }]],
        ["q8_0 adapter x1", [{ file: q8, scale: 1 }]],
    ];
    const lm = await llama.loadModel({ modelPath: base });
    const kBase = kilnGenerate(base, []);
    for (const [setName, adapters] of SETS) {
        const tag = `${arch} ${wt} [${setName}]`;
        const ref = await llamaGreedy(lm, adapters);
        const k = kilnGenerate(base, adapters);
        const cell = { arch, wt, set: setName, tokens: 0, total: ref.ids.length, maxLogprobDiff: 0, nearTie: null };
        let maxd = 0;
        for (let p = 0; p < ref.probs.length; p++) maxd = Math.max(maxd, maxLogprobDiff(ref.probs[p], logSoftmax(k.logits[p].logits)));
        cell.maxLogprobDiff = maxd;
        check(maxd <= tolAt(arch, wt), `log-probs of first ${ref.probs.length} positions ${tag}`,
            `max |diff| ${maxd.toExponential(2)} (tol ${tolAt(arch, wt)})`);
        check(firstDiff(k.ids, kBase.ids) >= 0, `the adapters change Kiln's greedy tokens ${tag}`,
            `first change at ${firstDiff(k.ids, kBase.ids)}`);
        const d = firstDiff(k.ids, ref.ids);
        if (d < 0) {
            cell.tokens = ref.ids.length;
            check(ref.ids.length === N_GEN, `greedy ${N_GEN} tokens ${tag}`);
        } else {
            cell.tokens = d;
            let detail = `first diff at ${d}: kiln ${k.ids.slice(d, d + 4)} llama.cpp ${ref.ids.slice(d, d + 4)}`;
            let ok = false;
            if (d < ref.ids.length && d < k.ids.length) {
                const kl = logSoftmax(kilnLogits(base, adapters, [...ref.input, ...ref.ids.slice(0, d)]));
                const ll = mapLog(await ref.distAt(d), kl.length);
                const t = nearTie(ref.ids[d], k.ids[d], ll, kl);
                ok = t.ok;
                detail += `; llama.cpp gap ${t.gap.toExponential(2)}, max |dlogprob| ${t.drift.toExponential(2)} (near-tie limit ${DRIFT})`;
                if (ok) cell.nearTie = d;
            }
            check(ok, `greedy tokens ${tag}${ok ? " equal up to a near-tie" : ""}`, detail);
        }
        await ref.dispose();

        // kiln-export-lora's merged model (F16/Q8 adapters, not the Q8_0 one:
        // llama.cpp's tool refuses quantized adapters, and so does Kiln's)
        if (adapters.some((a) => a.file === q8) || setName === "qv x0.5") { table.push(cell); continue; }
        const merged = path.join(dir, `${arch}-${wt}-merged.gguf`);
        run(bin("kiln-export-lora"), ["-m", base, ...loraArgs(adapters), "-o", merged]);
        const mm = await llama.loadModel({ modelPath: merged });
        const mref = await llamaGreedy(mm, []);
        // An F32 base merges into F32 weights: llama.cpp with the merged model
        // gives llama.cpp's base + adapter tokens. A quantized base merges
        // into F16 weights (as llama.cpp's export-lora does): another model
        // than Q8_0 + adapter (F16 instead of Q8_0 activations), so there the
        // merged file is compared across engines: Kiln's tokens on it equal
        // llama.cpp's.
        const against = wt === "f32" ? ref : { ids: kilnGenerate(merged, []).ids };
        const what = wt === "f32" ? "llama.cpp merged = llama.cpp base + adapters" : "Kiln merged = llama.cpp merged";
        const md = firstDiff(mref.ids, against.ids);
        cell.mergedTokens = md < 0 ? mref.ids.length : md;
        if (md < 0) check(mref.ids.length === N_GEN, `kiln-export-lora: ${what}, greedy ${N_GEN} tokens ${tag}`);
        else {
            let la;
            if (wt === "f32") {
                const again = await llamaGreedy(lm, adapters);
                la = mapLog(await again.distAt(md), kBase.logits[0].logits.length);
                await again.dispose();
            } else la = logSoftmax(kilnLogits(merged, [], [...mref.input, ...mref.ids.slice(0, md)]));
            const lb = mapLog(await mref.distAt(md), la.length);
            const t = nearTie(against.ids[md], mref.ids[md], la, lb);
            if (t.ok) cell.mergedNearTie = md;
            check(t.ok, `kiln-export-lora: ${what}, greedy tokens ${tag}${t.ok ? " equal up to a near-tie" : ""}`,
                `first diff at ${md}; gap ${t.gap.toExponential(2)}, max |dlogprob| ${t.drift.toExponential(2)}`);
        }
        await mref.dispose();
        await mm.dispose();
        table.push(cell);
    }
    await lm.dispose();
}

console.log(`\n${"base".padEnd(14)}${"adapters".padEnd(22)}tokens equal   max |dlogprob|   merged model tokens equal`);
for (const c of table) {
    console.log(`${(c.arch + " " + c.wt).padEnd(14)}${c.set.padEnd(22)}${`${c.tokens}/${c.total}${c.nearTie != null ? "*" : ""}`.padEnd(15)}` +
        `${c.maxLogprobDiff.toExponential(2).padEnd(17)}${c.mergedTokens != null ? `${c.mergedTokens}/${N_GEN}${c.mergedNearTie != null ? "*" : ""}` : "-"}`);
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ passed, failed, table }, null, 1));
console.log(`\n${passed} passed, ${failed} failed (* equal up to a near-tie)`);
await llama.dispose();
process.exit(failed ? 1 : 0);
