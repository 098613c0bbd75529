// LoRA fine-tuning, end to end, with llama.cpp as the judge of the file:
// kiln-finetune trains an adapter for the embedded stories260K on 200 lines
// about "Zorbu the otter" (tests/data/zorbu), a name the model never saw.
//  - the validation loss (held-out lines) must fall by at least half;
//  - the adapter's GGUF metadata is llama.cpp's LoRA layout (read with
//    node-llama-cpp's GGUF reader);
//  - Kiln's own greedy generation from "Once upon a time" (kiln-generate
//    --lora ADAPTER) names Zorbu; kiln-generate without the adapter does not;
//  - llama.cpp (node-llama-cpp 3.21.1) loading base + adapter generates,
//    greedily from "Once upon a time", text that names Zorbu; the base
//    model alone does not (so it is the adapter that does it);
//  - --lora-dropout: 0 writes the bytes of a run without the option, 0.2
//    other bytes, the same twice; an out-of-range value is refused by name.
//
//   node tests/oracle/finetune.mjs [--build DIR]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { readGgufFileInfo } from "node-llama-cpp";
import { loadOracleLlama } from "./llamacpp.mjs";
import { runTool } from "./compare.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const argv = process.argv.slice(2);
const build = path.resolve(root, argv.includes("--build") ? argv[argv.indexOf("--build") + 1] : "build");
const model = path.join(root, "models/stories260K.gguf");
const data = path.join(root, "tests/data/zorbu/zorbu.txt");
const outDir = path.join(build, "oracle-finetune");
mkdirSync(outDir, { recursive: true });
const adapter = path.join(outDir, "zorbu-lora.gguf");

let failed = 0;
function check(ok, what, detail = "") {
    console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? " " + detail : ""}`);
    if (!ok) failed++;
}

// ---- train (a few seconds)
const args = ["-m", model, "--data", data, "--lora-rank", "8", "--lora-alpha", "16", "--lora-targets", "q,v",
    "--ctx", "64", "--batch", "8", "--epochs", "3", "--lr", "2e-2", "--seed", "1", "--threads", "1", "-o", adapter, "--json"];
const t0 = Date.now();
const out = execFileSync(path.join(build, "bin/kiln-finetune"), args, { encoding: "utf8" });
const events = out.trim().split("\n").map((l) => JSON.parse(l));
const vals = events.filter((e) => e.event === "val");
const steps = events.filter((e) => e.event === "step");
check(steps.length > 0 && steps.every((s) => Number.isFinite(s.loss)), "kiln-finetune reports a finite loss per step", `(${steps.length} steps)`);
const v0 = vals[0]?.val_loss, v1 = vals.at(-1)?.val_loss;
check(vals.length >= 2 && v1 <= v0 / 2, "validation loss falls by at least half", `(${v0?.toFixed(4)} -> ${v1?.toFixed(4)}, ${((Date.now() - t0) / 1000).toFixed(1)} s)`);

// ---- --lora-dropout on short runs (3 steps)
const short = (name, extra) => {
    const f = path.join(outDir, name);
    runTool(path.join(build, "bin/kiln-finetune"), ["-m", model, "--data", data, "--ctx", "32", "--batch", "4", "--lr", "1e-2",
        "--seed", "5", "--threads", "1", "--stop-after", "3", "-o", f, ...extra]);
    return readFileSync(f);
};
const plain = short("plain.gguf", []), zero = short("drop0.gguf", ["--lora-dropout", "0"]);
const dropA = short("dropA.gguf", ["--lora-dropout", "0.2"]), dropB = short("dropB.gguf", ["--lora-dropout", "0.2"]);
check(zero.equals(plain), "--lora-dropout 0 writes the bytes of a run without it");
check(!dropA.equals(plain) && dropA.equals(dropB), "--lora-dropout 0.2 changes the adapter, the same way twice");
const bad = spawnSync(path.join(build, "bin/kiln-finetune"), ["-m", model, "--data", data, "--lora-dropout", "1.5", "-o", path.join(outDir, "bad.gguf")], { encoding: "utf8" });
check(bad.status !== 0 && /dropout/.test(bad.stderr), "--lora-dropout 1.5 refused", JSON.stringify(bad.stderr.trim()));

// ---- the file as llama.cpp's loader expects it
const info = await readGgufFileInfo(adapter, { readTensorInfo: true });
const meta = info.metadata;
check(meta.general?.type === "adapter" && meta.general?.architecture === "llama" && meta.adapter?.type === "lora" &&
    meta.adapter?.lora?.alpha === 16, "adapter metadata", JSON.stringify({ general: meta.general, adapter: meta.adapter }));
const tensors = info.tensorInfo ?? [];
const qa = tensors.find((t) => t.name === "blk.0.attn_q.weight.lora_a");
const qb = tensors.find((t) => t.name === "blk.0.attn_q.weight.lora_b");
check(tensors.length === 5 * 2 * 2 && qa && qb && String(qa.dimensions) === "64,8" && String(qb.dimensions) === "8,64",
    "adapter tensors: <base>.lora_a [n_in, r], <base>.lora_b [r, n_out] for q and v of 5 layers",
    qa && qb ? `(${tensors.length} tensors, lora_a ${qa.dimensions}, lora_b ${qb.dimensions})` : `(${tensors.length} tensors)`);

// ---- Kiln generates with the adapter (kiln-generate --lora)
const kilnGreedy = (lora) => runTool(path.join(build, "bin/kiln-generate"),
    ["-m", model, "-p", "Once upon a time", "-n", "48", "--temp", "0", "-t", "1", ...(lora ? ["--lora", adapter] : [])]);
const kilnBase = kilnGreedy(false), kilnTuned = kilnGreedy(true);
check(kilnBase.startsWith("Once upon a time") && !kilnBase.includes("Zorbu"), "kiln-generate without the adapter does not say Zorbu", JSON.stringify(kilnBase));
check(kilnTuned.startsWith("Once upon a time") && kilnTuned.includes("Zorbu"), "kiln-generate --lora with the adapter says Zorbu", JSON.stringify(kilnTuned));

// ---- llama.cpp generates with the adapter
const llama = await loadOracleLlama();
const lm = await llama.loadModel({ modelPath: model });
async function greedy(lora) {
    const ctx = await lm.createContext({ contextSize: 128, batchSize: 128, threads: 1, sequences: 1, ...(lora ? { lora } : {}) });
    const seq = ctx.getSequence();
    const input = [lm.tokens.bos, ...lm.tokenize("Once upon a time")];
    const opts = { temperature: 0 };
    const r = await seq.controlledEvaluate(input.map((t, i) => (i === input.length - 1 ? [t, { generateNext: { token: true, options: opts } }] : t)));
    const ids = [];
    let next = r[input.length - 1].next.token;
    while (ids.length < 48 && next != null && !lm.isEogToken(next)) {
        ids.push(next);
        const s = await seq.controlledEvaluate([[next, { generateNext: { token: true, options: opts } }]]);
        next = s[0].next.token;
    }
    await ctx.dispose();
    return lm.detokenize(ids);
}
const base = await greedy(null);
const tuned = await greedy({ adapters: [{ filePath: adapter }] });
check(!base.includes("Zorbu"), "base model alone does not say Zorbu", JSON.stringify("Once upon a time" + base));
check(tuned.includes("Zorbu"), "llama.cpp with Kiln's adapter says Zorbu", JSON.stringify("Once upon a time" + tuned));
await lm.dispose();

console.log(failed ? `finetune oracle: ${failed} failed` : "finetune oracle: all passed");
process.exit(failed ? 1 : 0);
