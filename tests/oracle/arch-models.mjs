// The random-weight decoder models every architecture test shares
// (arch.mjs against llama.cpp, arch-wasm.mjs in the wasm engines,
// tests/e2e/arch.test.mjs in Chromium): one file per architecture and weight
// type, written by kiln-synth-model into BUILD/oracle-arch/ once and reused
// while it is newer than the generator and its vocabulary (the generator is
// deterministic, so a reused file is the file it would write again). Each
// process writes under a name of its own and renames: scripts/test-oracle.sh
// runs arch.mjs and finetune-arch.mjs side by side, and two processes that
// write the same model at once each rename a whole, identical file.
import { existsSync, mkdirSync, renameSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runTool } from "./compare.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** architecture -> the vocabulary its test model carries (SentencePiece for
 * the llama and gemma families and phi3, byte-level BPE for the others) */
export const ARCH_VOCAB = [
    ["llama", "llama-spm"], ["qwen3", "gpt-2"], ["gemma", "llama-spm"], ["gemma2", "llama-spm"],
    ["gemma3", "llama-spm"], ["granite", "gpt-2"], ["smollm3", "gpt-2"], ["olmo2", "gpt-2"],
    ["phi2", "gpt-2"], ["phi3", "phi-3"], ["qwen2moe", "gpt-2"], ["qwen3moe", "gpt-2"],
];
export const ARCH_TYPES = ["f32", "f16", "q8_0", "q4_K"];
// Q5_K, Q6_K and the Q4_K_M mix (Q6_K output and some ffn_down / attn_v,
// Q4_K elsewhere; kiln-quantize, byte-identical to llama-quantize's by
// quant-mix.mjs) on a few cells only, to keep the suites' time: their dots
// are the same code under every architecture (arch.mjs, arch-wasm.mjs)
export const EXTRA_TYPES = { llama: ["q5_K", "q6_K", "q4_K_M"], qwen3: ["q6_K", "q4_K_M"] };
/** weight "types" that are kiln-quantize mixes of the F32 model */
const MIXES = ["q4_K_M", "q5_K_M"];

const mtime = (f) => statSync(f).mtimeMs;

/** the path of the model of `arch` in weight type `wt`, written when missing or stale */
export function archModel(buildDir, arch, wt) {
    const vocab = ARCH_VOCAB.find(([a]) => a === arch)?.[1];
    if (!vocab) throw new Error(`no test model for architecture '${arch}'`);
    const dir = path.join(buildDir, "oracle-arch");
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `${arch}-${wt}.gguf`);
    const synth = path.join(buildDir, "bin", "kiln-synth-model");
    const vocabFile = path.join(root, "tests/data/vocab", `ggml-vocab-${vocab}.gguf`);
    if (MIXES.includes(wt)) {
        // a llama-quantize mix (Q4_K_M: Q6_K output and some attn_v /
        // ffn_down, Q4_K elsewhere) of the F32 model, by kiln-quantize
        const f32 = archModel(buildDir, arch, "f32");
        const quantize = path.join(buildDir, "bin", "kiln-quantize");
        if (!existsSync(file) || mtime(file) < mtime(f32) || mtime(file) < mtime(quantize)) {
            const tmp = `${file}.tmp-${process.pid}`;
            runTool(quantize, [f32, tmp, wt]);
            renameSync(tmp, file);
        }
        return file;
    }
    if (!existsSync(file) || mtime(file) < mtime(synth) || mtime(file) < mtime(vocabFile)) {
        // written aside, then renamed: an interrupted run leaves no file that looks fresh
        const tmp = `${file}.tmp-${process.pid}`;
        runTool(synth, [tmp, "--arch", arch, "--type", wt, "--vocab", vocabFile]);
        renameSync(tmp, file);
    }
    return file;
}
