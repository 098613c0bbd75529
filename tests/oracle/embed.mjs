// Cross-check Kiln's embeddings against llama.cpp's (node-llama-cpp 3.21.1,
// LlamaEmbeddingContext.getEmbeddingFor, the ggml CPU variant pinned by
// llamacpp.mjs) on random-weight encoders written by kiln-synth-encoder
// (bert and nomic-bert, small shapes and all-MiniLM-L6's real shapes, F32 /
// F16 / Q8_0, every pooling type) and on the stories260K decoder. Per model
// and input text:
//
//  - the token ids equal llama.cpp's ([CLS] WordPiece [SEP] for bert
//    vocabularies, BOS + SentencePiece for stories260K);
//  - the raw vectors (getEmbeddingFor returns them un-normalized) agree to
//    max |kiln - llama.cpp| <= TOL.raw * max |llama.cpp|;
//  - after L2 normalization (Kiln's --normalize 1 against llama.cpp's vector
//    divided by its norm): max abs diff <= TOL.norm and cosine >= TOL.cos
//    (TOL per weight type below).
//
// With pooling none llama.cpp's getEmbeddingFor gives the last token's
// vector; Kiln's --pooling none gives every token's, and the last one is
// compared (the others are compared through mean pooling).
//
//   node tests/oracle/embed.mjs [--build DIR] [--json FILE] [--only NAME,NAME]
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describeOracle, loadOracleLlama, oracleIsaArgs } from "./llamacpp.mjs";
import { firstDiff } from "./compare.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
let buildDir = path.join(root, "build");
let jsonOut = null;
let only = null;
for (let i = 0; i < args.length; i++) {
    if (args[i] === "--build") buildDir = path.resolve(args[++i]);
    else if (args[i] === "--json") jsonOut = path.resolve(args[++i]);
    else if (args[i] === "--only") only = args[++i].split(",");
}
const bin = (name) => path.join(buildDir, "bin", name);
const modelDir = path.join(buildDir, "oracle-embed");
const VOCAB = path.join(root, "tests/data/vocab/ggml-vocab-bert-bge.gguf");

// Tolerances, per weight type. Both engines run the same operations in the
// same precision (attention in F32: llama.cpp without flash attention, see
// below; activations rounded to F16 / quantized to Q8_0 blocks before an
// F16 / Q8_0 mat-mul, GELU through ggml's f16 table). A rounding step is
// what makes a difference grow: an input that lands on the other side of an
// f16 rounding boundary (GELU's table, F16 mat-mul inputs) or of a Q8_0
// quantization step moves by a whole step (2^-11 relative, or 1/127 of its
// block's largest value), and that carries to the next layers. So every op
// feeding such a step sums in llama.cpp's order (its x86 build, pinned by
// llamacpp.mjs): the LayerNorm (ops_norm.c), the GELU table (decoder.c), the
// attention's two f32 products (ops_matmul.c: ggml_order), checked value for
// value by scripts/ggml-op-compare/encoder.c. Q8_0 models then agree to
// 1e-7, and so do F32 ones (their weight mat-muls take the same order:
// measured 2.2e-7 raw, 6.5e-8 normalized); F16 ones differ by the F16
// products' order and rounding (llama.cpp rounds the activations to fp16),
// continuous and small.
const TOL = {
    f32: { raw: 1e-5, norm: 1e-6, cos: 0.9999999 },
    f16: { raw: 1e-3, norm: 2e-4, cos: 0.99999 },
    q8_0: { raw: 1e-4, norm: 1e-5, cos: 0.999999 },
    "one-layer": { raw: 1e-5, norm: 1e-5, cos: 0.9999999 },
};

const TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Äpfel und Birnen: naïve café owners' résumés (2024)!",
    "Embeddings map sentences to vectors; similar sentences land close together, which is what semantic search, " +
        "clustering and retrieval-augmented generation rely on. This longer input spans many more tokens than the " +
        "others, so attention over the whole sequence is exercised, as are the position embeddings beyond the first few.",
    "中文 文本 and emoji 😀 mixed with CAPITALS",
];

// name, kiln-synth-encoder arguments
const SMALL = ["--width", "128", "--layers", "2", "--heads", "4", "--ff", "256", "--ctx", "128"];
const MINILM = ["--width", "384", "--layers", "6", "--heads", "12", "--ff", "1536", "--ctx", "512"];
const MODELS = [];
for (const wt of ["f32", "f16", "q8_0"]) {
    MODELS.push([`bert-mean-${wt}`, ["--arch", "bert", "--type", wt, "--pooling", "mean", ...SMALL]]);
    MODELS.push([`nomic-bert-mean-${wt}`, ["--arch", "nomic-bert", "--type", wt, "--pooling", "mean", ...SMALL]]);
}
MODELS.push(["bert-cls-f32", ["--arch", "bert", "--type", "f32", "--pooling", "cls", ...SMALL]]);
MODELS.push(["bert-last-f32", ["--arch", "bert", "--type", "f32", "--pooling", "last", ...SMALL]]);
MODELS.push(["bert-none-f32", ["--arch", "bert", "--type", "f32", "--pooling", "none", ...SMALL]]);
// attention.causal = true: llama.cpp still runs an encoder bidirectional (so does Kiln)
MODELS.push(["bert-causal-mean-f32", ["--arch", "bert", "--type", "f32", "--pooling", "mean", "--causal", ...SMALL]]);
MODELS.push(["nomic-bert-cls-f16", ["--arch", "nomic-bert", "--type", "f16", "--pooling", "cls", ...SMALL]]);
MODELS.push(["minilm-l6-mean-f32", ["--arch", "bert", "--type", "f32", "--pooling", "mean", ...MINILM]]);
MODELS.push(["minilm-l6-mean-q8_0", ["--arch", "bert", "--type", "q8_0", "--pooling", "mean", ...MINILM]]);
MODELS.push(["minilm-l1-none-q8_0", ["--arch", "bert", "--type", "q8_0", "--pooling", "none", ...MINILM, "--layers", "1"], "one-layer"]);
// the decoder: its file has no pooling_type (none: llama.cpp gives the last
// token's vector); mean and cls set on llama.cpp's side through a metadata
// override and on Kiln's with --pooling
const STORIES = path.join(root, "models/stories260K.gguf");
const DECODERS = [["stories260K", STORIES, null], ["stories260K-mean", STORIES, "mean"], ["stories260K-cls", STORIES, "cls"]];
const POOL_ID = { none: 0, mean: 1, cls: 2, last: 3 };

let passed = 0;
let failed = 0;
function check(ok, name, detail = "") {
    if (ok) passed++;
    else failed++;
    console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? "  " + detail : ""}`);
    return ok;
}

function run(cmd, argv, input = undefined) {
    const r = spawnSync(cmd, argv, { encoding: "utf8", input, maxBuffer: 512 << 20 });
    if (r.error) throw r.error;
    if (r.status !== 0) throw new Error(`${path.basename(cmd)} ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
    return r;
}

// Kiln: every text in one process; --ids prints each text's ids on stderr
function kilnEmbed(file, texts, normalize, pooling) {
    const r = run(bin("kiln-embed"), ["-m", file, "--json", "--ids", "-t", "1", "--normalize", normalize ? "1" : "0",
        ...(pooling ? ["--pooling", pooling] : []), ...oracleIsaArgs()], texts.join("\n") + "\n");
    const vecs = r.stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
    const ids = r.stderr.split("\n").filter((l) => l !== "").map((l) => l.trim().split(/\s+/).map(Number));
    return { vecs, ids };
}

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
function compare(k, l) {
    let maxAbs = 0, maxRef = 0, dot = 0;
    for (let i = 0; i < l.length; i++) {
        maxAbs = Math.max(maxAbs, Math.abs(k[i] - l[i]));
        maxRef = Math.max(maxRef, Math.abs(l[i]));
        dot += k[i] * l[i];
    }
    return { rel: maxAbs / maxRef, cos: dot / (norm(k) * norm(l)) };
}

mkdirSync(modelDir, { recursive: true });
const llama = await loadOracleLlama();
console.log(describeOracle());
const table = {};

// WordPiece edge cases (ids only): case folding outside ASCII, accents,
// compatibility characters, CJK / kana / hangul, emoji, punctuation runs
const EDGE = [
    "ÄÖÜ ß ǅ İ Ⅻ ﬁ", "Ångström café naïve Ωmega ΣΊΣΥΦΟΣ", "日本語のテキスト、中文，한국어",
    "emoji 😀👍🏽 and symbols $100 ±5% <tag> a_b c-d e.f", "don't won't it's \"quoted\" (paren) [brack] {brace}",
    "tab\tseparated\tand  double  spaces", "ＡＢＣ full-width ｱｲｳ", "Ⅰ Ⅱ ① ② ¹²³ ½", "ﬀ ﬃ œ æ Æ Œ ø Ø đ Đ ł Ł", "Straße ǈ ǋ ǲ Ḁ ẞ",
];
{
    const lm = await llama.loadModel({ modelPath: VOCAB, vocabOnly: true });
    for (const t of EDGE) {
        const want = [...lm.tokenize(t)];
        const got = run(bin("kiln-tokenize"), ["-m", VOCAB, "--no-bos"], t).stdout.trim().split(/\s+/).map(Number);
        check(firstDiff(got, want) < 0, `WordPiece ids ${JSON.stringify(t)}`, firstDiff(got, want) < 0 ? `(${want.length} ids)` : `kiln [${got}] llama.cpp [${want}]`);
    }
    await lm.dispose();
}

const all = [...MODELS.map(([n, a, t]) => [n, a, null, t, null]), ...DECODERS.map(([n, f, p]) => [n, null, f, "f32", p])]
    .filter(([n]) => !only || only.includes(n));
for (const [name, synth, given, tolName, pooling] of all) {
    let file = given;
    if (synth) {
        file = path.join(modelDir, `${name}.gguf`);
        run(bin("kiln-synth-encoder"), [file, "--vocab", VOCAB, ...synth]);
    }
    // encoders without flash attention: llama.cpp then runs attention in F32
    // (with it, it casts K and V to F16 when there is no cache), as Kiln's
    // encoder does; decoders with it, over the F16 KV cache, as Kiln's decoder
    const lm = await llama.loadModel({ modelPath: file, defaultContextFlashAttention: !synth,
        ...(pooling ? { metadataOverrides: { llama: { pooling_type: POOL_ID[pooling] } } } : {}) });
    const ctxSize = synth ? Number(synth[synth.indexOf("--ctx") + 1]) : 256;
    const ectx = await lm.createEmbeddingContext({ contextSize: ctxSize, batchSize: ctxSize, threads: 1 });
    const pooledNone = synth ? synth.includes("none") : !pooling; // the decoder's file has no pooling_type: none
    // the decoder's context (stories260K: 128 positions) takes the shorter texts only
    const texts = synth ? TEXTS : TEXTS.filter((t) => t.length < 100);
    const raw = kilnEmbed(file, texts, false, pooling);
    const normed = kilnEmbed(file, texts, true, pooling);
    const cell = { maxRel: 0, maxNormDiff: 0, minCos: 1 };
    const tol = TOL[tolName ?? synth[synth.indexOf("--type") + 1]];
    for (let t = 0; t < texts.length; t++) {
        const tag = `${name} ${JSON.stringify(texts[t].slice(0, 20))}`;
        const ref = [...lm.tokenize(texts[t])];
        const bos = lm.tokens.bos, sep = lm.tokens.sep;
        const want = synth ? [bos, ...ref, sep] : [...(lm.tokens.shouldPrependBosToken ? [bos] : []), ...ref];
        check(firstDiff(raw.ids[t], want) < 0, `token ids ${tag}`, `(${want.length} ids)` +
            (firstDiff(raw.ids[t], want) < 0 ? "" : ` kiln [${raw.ids[t]}] llama.cpp [${want}]`));
        const l = (await ectx.getEmbeddingFor(texts[t])).vector;
        const pick = (v) => (pooledNone ? v[v.length - 1] : v);
        const kRaw = pick(raw.vecs[t]), kNorm = pick(normed.vecs[t]);
        const { rel, cos } = compare(kRaw, l);
        const ln = norm(l);
        let nd = 0;
        for (let i = 0; i < l.length; i++) nd = Math.max(nd, Math.abs(kNorm[i] - l[i] / ln));
        cell.maxRel = Math.max(cell.maxRel, rel);
        cell.maxNormDiff = Math.max(cell.maxNormDiff, nd);
        cell.minCos = Math.min(cell.minCos, cos);
        check(kRaw.length === l.length && rel <= tol.raw, `raw vector ${tag}`,
            `n ${l.length}, max |diff| / max |ref| ${rel.toExponential(2)} (tol ${tol.raw})`);
        check(nd <= tol.norm && cos >= tol.cos, `normalized vector ${tag}`,
            `max |diff| ${nd.toExponential(2)} (tol ${tol.norm}), cosine 1 - ${(1 - cos).toExponential(2)} (min ${tol.cos})`);
    }
    table[name] = cell;
    await ectx.dispose();
    await lm.dispose();
}

console.log(`\n${"model".padEnd(24)}${"max rel raw".padEnd(14)}${"max |diff| norm".padEnd(18)}min cosine`);
for (const [name, c] of Object.entries(table)) {
    console.log(`${name.padEnd(24)}${c.maxRel.toExponential(2).padEnd(14)}${c.maxNormDiff.toExponential(2).padEnd(18)}1 - ${(1 - c.minCos).toExponential(2)}`);
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ passed, failed, table }, null, 1));
console.log(`\n${passed} passed, ${failed} failed`);
await llama.dispose();
process.exit(failed ? 1 : 0);
