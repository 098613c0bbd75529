// LoRA fine-tuning beyond llama, with llama.cpp as the judge: kiln-finetune
// trains an adapter for the random-weight phi3, qwen3, gemma3, qwen3moe and
// qwen2moe models of the architecture tests (tests/oracle/arch-models.mjs,
// F32 weights) on the first 80 lines of the Zorbu corpus (tests/data/zorbu).
// phi3 has a fused q/k/v weight (attn_qkv) and a fused [gate; up] weight
// (ffn_up): targets q,v and up put one A/B pair on each fused weight, as
// llama.cpp applies adapters to them. On the mixture-of-experts models the
// targets gate, up, down put one A/B pair per expert on the 3-D expert
// tensors (lora_a [n_in, r, n_expert], lora_b [r, n_out, n_expert], which
// llama.cpp's build_lora_mm_id multiplies through mul_mat_id) and one on
// each of qwen2moe's shared-expert weights.
// Per architecture:
//  - the validation loss falls by at least a quarter (a random model has
//    no knowledge of the text: this is learning, from a high start);
//  - the adapter holds the tensors llama.cpp looks up (<base>.lora_a/b,
//    attn_qkv and the fused ffn_up for phi3) with the shapes it expects;
//  - the adapter changes Kiln's greedy tokens from "Once upon a time, there
//    was a little otter named";
//  - Kiln with the adapter (kiln-generate --lora-scaled, at scale 1 and
//    0.5) against llama.cpp (node-llama-cpp 3.21.1) with the same adapter:
//    log-probabilities after each of the first 10 prompt tokens agree within
//    the tolerance arch.mjs uses for F32 weights (GELU models: 1e-2), and
//    N_GEN greedy tokens are equal (a step where the engines differ passes
//    only as a near-tie, as in lora.mjs);
//  - mixture-of-experts models: kiln-export-lora merges the adapter into
//    the F32 base, each expert's matrix with its own pair; llama.cpp with
//    the merged model gives llama.cpp's base + adapter greedy tokens (a
//    near-tie as above: W x + s B A x and (W + s B A) x round differently).
//
//   node tests/oracle/finetune-arch.mjs [--build DIR] [--arch qwen3moe,...]
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { readGgufFileInfo } from "node-llama-cpp";
import { archModel } from "./arch-models.mjs";
import { describeOracle, greedyOneByOne, loadOracleLlama, nextAfter, oracleIsaArgs } from "./llamacpp.mjs";
import { DRIFT, firstDiff, logSoftmax, mapLog, maxLogprobDiff, nearTie, parseGenerate, runTool } from "./compare.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const argv = process.argv.slice(2);
const build = path.resolve(root, argv.includes("--build") ? argv[argv.indexOf("--build") + 1] : "build");
const bin = (name) => path.join(build, "bin", name);
const data = path.join(root, "tests/data/zorbu/zorbu.txt");
const outDir = path.join(build, "oracle-finetune-arch");
mkdirSync(outDir, { recursive: true });
// the first 80 lines of the corpus: vocabularies of 32-50k tokens make each step cost ~100x stories260K's
const subset = path.join(outDir, "zorbu-80.txt");
writeFileSync(subset, readFileSync(data, "utf8").split("\n").slice(0, 80).join("\n") + "\n");

const N_GEN = 24;
// log-probs are compared after each of the prompt's first 10 tokens (a tuned
// model may end its greedy text early at an end-of-generation token)
const N_LOGIT_POS = 10;
const PROMPT = "Once upon a time, there was a little otter named";
const TOL = (arch) => (arch.startsWith("gemma") ? 1e-2 : 3e-3);
// [architecture, targets, adapted weights per layer, some adapted weights of
// layer 0 with their [n_in, n_out(, n_expert)]]
const CASES = [
    ["phi3", "q,v,up", 2, [["attn_qkv", 256, 512], ["ffn_up", 256, 1024]]],
    ["qwen3", "q,v", 2, [["attn_q", 256, 256], ["attn_v", 256, 128]]],
    ["gemma3", "q,v", 2, [["attn_q", 256, 256], ["attn_v", 256, 128]]],
    ["qwen3moe", "q,v,gate,up,down", 5, [["attn_q", 256, 256], ["ffn_gate_exps", 256, 256, 8], ["ffn_down_exps", 256, 256, 8]]],
    ["qwen2moe", "q,v,gate,up,down", 8, [["attn_v", 256, 128], ["ffn_up_exps", 256, 256, 8], ["ffn_down_shexp", 256, 256]]],
];
const ONLY = argv.includes("--arch") ? argv[argv.indexOf("--arch") + 1].split(",") : null;
const RANK = 8;

let failed = 0;
function check(ok, what, detail = "") {
    console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? "  " + detail : ""}`);
    if (!ok) failed++;
    return ok;
}

const llama = await loadOracleLlama();
console.log(describeOracle());

// kiln-export-lora's merge of an expert adapter, run by llama.cpp, against
// llama.cpp's base + adapter greedy tokens (refIds; seq holds that context)
async function checkMerged(arch, base, adapter, seq, input, refIds) {
    const merged = path.join(outDir, `${arch}-merged.gguf`);
    runTool(bin("kiln-export-lora"), ["-m", base, "--lora", adapter, "-o", merged]);
    const mm = await llama.loadModel({ modelPath: merged });
    const mctx = await mm.createContext({ contextSize: 256, batchSize: 256, threads: 1, sequences: 1, flashAttention: true });
    const mseq = mctx.getSequence();
    const got = await greedyOneByOne(mseq, input, N_GEN, 1, (t) => mm.isEogToken(t));
    const d = firstDiff(got.ids, refIds);
    if (d < 0) check(refIds.length > 0, `${arch}: kiln-export-lora's merged model in llama.cpp = llama.cpp base + adapter, greedy tokens`, `(${refIds.length} tokens)`);
    else {
        let ok = false, detail = `first diff at ${d}: merged ${got.ids.slice(d, d + 4)} base + adapter ${refIds.slice(d, d + 4)}`;
        if (d < refIds.length && d < got.ids.length) {
            const prefix = [...input, ...refIds.slice(0, d)];
            const lb = (await nextAfter(seq, prefix)).probabilities, lmg = (await nextAfter(mseq, prefix)).probabilities;
            let n = 0;
            for (const t of [...lb.keys(), ...lmg.keys()]) n = Math.max(n, t + 1);
            const t = nearTie(refIds[d], got.ids[d], mapLog(lb, n), mapLog(lmg, n));
            ok = t.ok;
            detail += `; gap ${t.gap.toExponential(2)}, max |dlogprob| ${t.drift.toExponential(2)} (near-tie limit ${DRIFT})`;
        }
        check(ok, `${arch}: kiln-export-lora's merged model in llama.cpp = llama.cpp base + adapter, greedy tokens${ok ? " equal up to a near-tie" : ""}`, detail);
    }
    await mctx.dispose();
    await mm.dispose();
}

for (const [arch, targets, perLayer, shapes] of CASES) {
    if (ONLY && !ONLY.includes(arch)) continue;
    const base = archModel(build, arch, "f32");
    const adapter = path.join(outDir, `${arch}-lora.gguf`);
    // ---- train: 2 epochs, 8 sequences of 32 tokens per step (gemma3: 16 of 8, its test model's sliding window)
    const t0 = Date.now();
    const out = runTool(bin("kiln-finetune"), ["-m", base, "--data", subset, "--lora-rank", String(RANK), "--lora-alpha", String(2 * RANK),
        "--lora-targets", targets, "--ctx", String(arch === "gemma3" ? 8 : 32), "--batch", arch === "gemma3" ? "16" : "8", "--epochs", "2", "--lr", "2e-2",
        "--seed", "3", "--threads", "2", "-o", adapter, "--json"]);
    const events = out.trim().split("\n").map((l) => JSON.parse(l));
    const vals = events.filter((e) => e.event === "val");
    const steps = events.filter((e) => e.event === "step");
    const v0 = vals[0]?.val_loss, v1 = vals.at(-1)?.val_loss;
    check(steps.length > 0 && steps.every((s) => Number.isFinite(s.loss)) && vals.length >= 2 && v1 <= 0.75 * v0,
        `${arch}: kiln-finetune's validation loss falls by at least a quarter`,
        `(${v0?.toFixed(4)} -> ${v1?.toFixed(4)}, ${steps.length} steps, ${((Date.now() - t0) / 1000).toFixed(1)} s)`);

    // ---- the file as llama.cpp's loader expects it
    const info = await readGgufFileInfo(adapter, { readTensorInfo: true });
    const tensors = info.tensorInfo ?? [];
    const meta = info.metadata;
    let shapesOk = meta.general?.type === "adapter" && meta.general?.architecture === arch && meta.adapter?.type === "lora";
    const seen = [];
    for (const [w, nIn, nOut, nExp] of shapes) {
        const a = tensors.find((t) => t.name === `blk.0.${w}.weight.lora_a`), b = tensors.find((t) => t.name === `blk.0.${w}.weight.lora_b`);
        seen.push(`${w} ${a?.dimensions} / ${b?.dimensions}`);
        const x = nExp ? `,${nExp}` : "";
        shapesOk &&= a && b && String(a.dimensions) === `${nIn},${RANK}${x}` && String(b.dimensions) === `${RANK},${nOut}${x}`;
    }
    const nLayers = Number(meta[arch]?.block_count ?? 0) || new Set(tensors.map((t) => t.name.split(".")[1])).size;
    check(shapesOk && tensors.length === 2 * perLayer * nLayers, `${arch}: adapter layout (${targets})`,
        `(${tensors.length} tensors, ${nLayers} layers; ${seen.join("; ")})`);

    // ---- Kiln and llama.cpp with the adapter
    const kiln = (scale) => parseGenerate(runTool(bin("kiln-generate"), ["-m", base, "-p", PROMPT, "-n", String(N_GEN), "-t", "1", "--ctx", "256",
        "--batch", "1", "--print-ids", "--print-logits", String(N_LOGIT_POS), ...(scale ? ["--lora-scaled", adapter, String(scale)] : []),
        ...oracleIsaArgs()]));
    const kilnLogits = (scale, ids) => JSON.parse(runTool(bin("kiln-logits"), ["-m", base, "--ctx", "256", "--ids", ids.join(","),
        "--lora-scaled", adapter, String(scale), ...oracleIsaArgs()])).logits;
    const kBase = kiln(0);
    const lm = await llama.loadModel({ modelPath: base });
    for (const scale of [1, 0.5]) {
        const tag = `${arch} adapter x${scale}`;
        const ctx = await lm.createContext({ contextSize: 256, batchSize: 256, threads: 1, sequences: 1, flashAttention: true,
            lora: { adapters: [{ filePath: adapter, scale }] } });
        const seq = ctx.getSequence();
        const input = [...(lm.tokens.shouldPrependBosToken ? [lm.tokens.bos] : []), ...lm.tokenize(PROMPT)];
        const ref = await greedyOneByOne(seq, input, N_GEN, N_LOGIT_POS, (t) => lm.isEogToken(t));
        if (scale === 1 && shapes.some((sh) => sh.length > 3)) await checkMerged(arch, base, adapter, seq, input, ref.ids);
        const k = kiln(scale);
        let maxd = 0;
        for (let p = 0; p < ref.probs.length; p++) maxd = Math.max(maxd, maxLogprobDiff(ref.probs[p], logSoftmax(k.logits[p].logits)));
        check(maxd <= TOL(arch), `${tag}: log-probs of the first ${ref.probs.length} positions, Kiln vs llama.cpp`,
            `max |diff| ${maxd.toExponential(2)} (tol ${TOL(arch)})`);
        if (scale === 1) check(firstDiff(k.ids, kBase.ids) >= 0, `${tag}: the adapter changes Kiln's greedy tokens`, `first change at ${firstDiff(k.ids, kBase.ids)}`);
        const d = firstDiff(k.ids, ref.ids);
        // equal lists shorter than N_GEN: both engines stopped at the same end-of-generation token
        if (d < 0) check(ref.ids.length > 0, `${tag}: greedy tokens equal`, `(${ref.ids.length} tokens${ref.ids.length < N_GEN ? ", then end of generation in both" : ""})`);
        else {
            let ok = false, detail = `first diff at ${d}: kiln ${k.ids.slice(d, d + 4)} llama.cpp ${ref.ids.slice(d, d + 4)}`;
            if (d < ref.ids.length && d < k.ids.length) {
                const kl = logSoftmax(kilnLogits(scale, [...input, ...ref.ids.slice(0, d)]));
                const ll = mapLog((await nextAfter(seq, [...input, ...ref.ids.slice(0, d)])).probabilities, kl.length);
                const t = nearTie(ref.ids[d], k.ids[d], ll, kl);
                ok = t.ok;
                detail += `; llama.cpp gap ${t.gap.toExponential(2)}, max |dlogprob| ${t.drift.toExponential(2)} (near-tie limit ${DRIFT})`;
            }
            check(ok, `${tag}: greedy tokens${ok ? " equal up to a near-tie" : ""}`, detail);
        }
        await ctx.dispose();
    }
    await lm.dispose();
}

console.log(failed ? `finetune-arch oracle: ${failed} failed` : "finetune-arch oracle: all passed");
process.exit(failed ? 1 : 0);
