// Every decoder architecture in WebAssembly: the random-weight models of
// arch.mjs (every architecture x F32, F16, Q8_0, Q4_K, and arch.mjs's extra
// Q5_K / Q6_K / Q4_K_M cells; tests/oracle/arch-models.mjs),
// loaded through the npm package (js/dist) into each wasm engine that is
// built (st: one thread; mt: pthreads, 2 threads; st-relaxed on the K-quant
// cells of llama and qwen3, against native Kiln on x8-repacked Q4_K as that
// engine holds them; every relaxed variant on request), generate the same 48
// greedy tokens as native Kiln on the same file (kiln-generate, the scalar
// row, weights not repacked: the layout wasm holds them in), for both
// arch.mjs prompts, the prompt evaluated in one batch on both sides. Native
// Kiln is the link to llama.cpp: arch.mjs compares it with llama.cpp on
// these files.
//
// Per model, engine and prompt:
//  - the prompt ids equal native kiln-tokenize's;
//  - the log-probs after the prompt (wasm: the package's top-8 logprobs of
//    the first generated token; native: kiln-logits on the same ids) agree
//    within TOL0: the arithmetic check;
//  - the 48 greedy tokens are equal, or part at a near-tie: at the first
//    differing step d each engine's pick is within DRIFT of the best on the
//    other engine too, and their log-probs there (wasm's top-8) agree
//    within DRIFT. Wasm sums F16, Q8_0
//    and Q4_K dot products in an order of its own (SIMD128: neither the
//    scalar row's nor the x86 rows'; relaxed SIMD fuses multiply-adds), and
//    libm's expf / cosf / sinf / tanhf (attention, RoPE, softcaps) are
//    musl's in wasm, glibc's natively (1-ulp apart on some inputs). The
//    Gemma family amplifies such differences: its GELU table (the same
//    65,536 f16 entries in wasm and natively) moves an activation by a
//    whole f16 step when a 1-ulp input difference crosses an f16 rounding
//    boundary, and gemma2/3's post-norm gains scale each block's output
//    (natively, scalar vs AVX2 F32 log-probs: gemma 5-7e-3, gemma3
//    5-7e-3 against llama 1-3e-3 and phi2 1-2e-3). So
//    on random models, which put many tokens within rounding of each other,
//    the rounding drift grows along the generation (measured 0.05-0.12 at the
//    steps where runs parted) until a near-tie flips; a wrong operation
//    instead fails TOL0 at step 0 or parts at a token far from the best.
// The table marks cells that parted at a near-tie with *.
//   node [--experimental-wasm-relaxed-simd] tests/oracle/arch-wasm.mjs [--build DIR] [--arch phi3,qwen3]
//        [--type f32,q8_0] [--engine st,mt,st-relaxed,mt-relaxed]
//   (needs npm run build:ts, at least one of wasm/dist/{st,mt}, and the native tools
//   kiln-synth-model, kiln-generate, kiln-logits, kiln-tokenize)
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ARCH_TYPES, ARCH_VOCAB, EXTRA_TYPES, archModel } from "./arch-models.mjs";
import { firstDiff, logSoftmax, runTool as run } from "./compare.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(`--${k}`) ? args[args.indexOf(`--${k}`) + 1] : d);
const buildDir = path.resolve(opt("build", path.join(root, "build")));
const bin = (name) => path.join(buildDir, "bin", name);
const ARCHS = opt("arch", ARCH_VOCAB.map(([a]) => a).join(",")).split(",");
// arch.mjs's extra K-quant cells (EXTRA_TYPES): wasm has kernels of its own
// for each (SIMD128, and relaxed SIMD's x8 Q4_K and Q6_K)
const typesOf = (arch) => (opt("type", null)?.split(",") ?? [...ARCH_TYPES, ...(EXTRA_TYPES[arch] ?? [])]);
const PROMPTS = ["Once upon a time", "The quick brown fox jumps over the lazy dog, and then it ran into the forest where"];
const N_GEN = 48;
const N_TOP = 8;
const CTX = 256;
// max |log p_wasm - log p_native| over wasm's top-8 after the prompt. F32:
// wasm sums F32 products, f16 dots and silu in llama.cpp's x86 orders
// (tinyBLAS's 8 lanes for batches), native's scalar row in Kiln's own:
// measured up to 7.0e-3 (gemma: its GELU table and post-norms amplify, as
// between native's scalar and AVX2 rows), 5.6e-3 (granite: its
// multipliers), 3.3e-3 elsewhere; arch.mjs allows llama.cpp 1e-2 on the
// GELU models. F16 / Q8_0 / Q4_K: most runs agree to 1e-6..1e-2, but an
// activation one rounding apart that crosses an f16 / q8 rounding boundary
// moves them further on these random models (README.md): measured 7.2e-2
// (gemma Q8_0), 7.0e-2 (granite Q8_0: its multipliers amplify), 3.2e-2
// (smollm3 Q8_0). A wrong operation moves them by 1 or more.
// IQ4_NL (--type iq4_nl, not a default cell) amplifies most: native Kiln's
// own two orders on these files (scalar row, plain weights, against AVX2 on
// x4 weights in llama.cpp's repacked order) differ by up to 2.0e-1 after the
// long prompt (smollm3; qwen3 1.2e-1, llama 3.3e-2), wasm against the scalar
// row by up to 1.3e-1 (qwen3, smollm3), the same before and after the wasm
// x4 kernels (wasm-ab.mjs: bit-identical).
const TOL0 = { f32: 1e-2, f16: 1e-1, q8_0: 1e-1, q4_K: 1e-1, q5_K: 1e-1, q6_K: 1e-1, q4_K_M: 1e-1, iq4_nl: 2.5e-1 };
// and at the step where greedy runs part; MoE: a router near-tie that picks
// another expert moves log-probs by a step of its own (measured 0.26-0.33 on
// qwen3moe Q4_K after 36-40 steps; llama.cpp's own batched and one-by-one
// runs of qwen3moe F16 differ by 0.19 the same way)
const DRIFT = 0.25;
const DRIFT_MOE = 0.4;
const driftAt = (arch) => (arch.endsWith("moe") ? DRIFT_MOE : DRIFT);
// MoE, quantized: a router near-tie inside the prompt that picks another
// expert moves the log-probs by the step DRIFT_MOE describes (qwen3moe Q4_K
// after its 18-token prompt: 1.2e-1 in wasm st and mt against native's
// scalar row), still far below a wrong operation's
const tol0 = (arch, wt) => (arch.endsWith("moe") && wt !== "f32" ? DRIFT_MOE : TOL0[wt]);

const { Kiln, relaxedSimdSupported } = await import(path.join(root, "js/dist/index.js"));
// the engines: st and mt (SIMD128) by default; st-relaxed / mt-relaxed with
// --engine, where this Node runs relaxed SIMD (Node 22+, or Node 20 with
// --experimental-wasm-relaxed-simd)
const ENGINES = { st: ["st", "simd128"], mt: ["mt", "simd128"], "st-relaxed": ["st", "relaxed"], "mt-relaxed": ["mt", "relaxed"] };
// Without --engine, also st-relaxed on the K-quant cells of llama and qwen3
// (RELAXED_CELLS): relaxed SIMD has its own Q4_K (repacked x8) and Q6_K kernels.
const built = (e) => ENGINES[e] && existsSync(path.join(root, "wasm/dist", e, `kiln-${e}.wasm`));
const engines = opt("engine", "st,mt").split(",").filter(built)
    .filter((e) => ENGINES[e][1] !== "relaxed" || relaxedSimdSupported());
if (!engines.length) {
    console.error("arch-wasm: no wasm engine built (bash scripts/build-wasm.sh)");
    process.exit(1);
}
const RELAXED_CELLS = { llama: ["q4_K", "q5_K", "q6_K", "q4_K_M"], qwen3: ["q4_K", "q6_K", "q4_K_M"] };
const relaxedExtra = !args.includes("--engine") && built("st-relaxed") && relaxedSimdSupported();
if (!args.includes("--engine") && !relaxedExtra) {
    console.log("st-relaxed on the K-quant cells NOT TESTED: " +
        (built("st-relaxed") ? "this Node runs no relaxed SIMD (Node 20: --experimental-wasm-relaxed-simd)" : "wasm/dist/st-relaxed not built"));
}
const enginesFor = (arch, wt) => (relaxedExtra && RELAXED_CELLS[arch]?.includes(wt) ? [...engines, "st-relaxed"] : engines);

// native Kiln's side, once per (file, prompt) for every engine
// Kiln's native side with the weights as in the file (KILN_NO_REPACK=1), as
// the wasm engines hold them: repacked Q4_K quantizes a batch's activations
// with llama.cpp's 4-row q8_K rule, plain Q4_K row by row as wasm does
// The relaxed-SIMD engines repack Q4_K to x8 as native Kiln does; their
// native side is native's own kernel row (AVX2 / AVX-512: llama.cpp's
// orders, which the relaxed engines follow: F32 products, exp and the x8
// sums) on repacked weights. Measured after the long prompt: qwen3 Q4_K
// 9.4e-7 against it, 9.9e-2 against the scalar row on repacked weights (as
// far as native's scalar and AVX2 rows are from each other there); llama
// Q4_K the other way round, 5.2e-2 and 1e-6 (Q4_K_M 4.1e-2): a rounding
// difference these random models amplify, below TOL0; tokens 48/48 equal.
// (qwen3 amplifies most: its Q4_K_M cell in st / mt, unchanged kernels
// against the unchanged scalar row, measures 8.6e-2.)
// a native tool on weights as the file has them (scalar row) or repacked
// (native's own row); the tools read KILN_NO_REPACK from the environment
function runNative(name, argv, repack, input) {
    process.env.KILN_NO_REPACK = repack ? "0" : "1";
    return run(bin(name), repack ? argv : [...argv, "--isa", "scalar"], input);
}
const nativeSeen = new Map();
function native(file, prompt, repack) {
    const key = `${file}|${prompt}|${repack}`;
    if (!nativeSeen.has(key)) {
        const ids = runNative("kiln-generate", ["-m", file, "-p", prompt, "-n", String(N_GEN), "-t", "1", "--ctx", String(CTX),
            "--print-ids"], repack).trim().split("\n").pop().trim().split(/\s+/).filter((x) => x !== "").map(Number);
        const input = run(bin("kiln-tokenize"), ["-m", file], prompt).trim().split(/\s+/).map(Number);
        nativeSeen.set(key, { ids, input });
    }
    return nativeSeen.get(key);
}
// native log-probs after the prompt, once per (file, prompt)
const afterPromptSeen = new Map();
function nativeAfterPrompt(file, nat, repack) {
    const key = `${file}|${nat.input.join(",")}|${repack}`;
    if (!afterPromptSeen.has(key)) afterPromptSeen.set(key, nativeLogprobs(file, nat.input, nat.ids, 0, repack));
    return afterPromptSeen.get(key);
}
// native log-probs after input + ids[0..d) (the prompt as one batch, as kiln-generate evaluates it)
function nativeLogprobs(file, input, ids, d, repack) {
    const out = runNative("kiln-logits", ["-m", file, "--ctx", String(CTX), "--ids", [...input, ...ids.slice(0, d)].join(","),
        "--batch", String(input.length)], repack);
    return logSoftmax(JSON.parse(out).logits);
}

let passed = 0, failed = 0;
const table = {};
const line = (ok, s) => { ok ? passed++ : failed++; console.log(`${ok ? "ok  " : "FAIL"} ${s}`); };

for (const arch of ARCHS) for (const wt of typesOf(arch)) {
    const file = archModel(buildDir, arch, wt);
    const bytes = new Uint8Array(readFileSync(file));
    for (const engine of enginesFor(arch, wt)) {
        const cell = ((table[arch] ??= {})[`${wt}/${engine}`] = { equal: 0, total: 0, nearTie: false, pass: true, d0: 0 });
        const [build, simd] = ENGINES[engine];
        // the relaxed engines repack Q4_K only: Q5_K / Q6_K cells keep the scalar row
        const repack = simd === "relaxed" && (wt === "q4_K" || wt === "q4_K_M");
        const kiln = await Kiln.create({ build, simd, threads: build === "mt" ? 2 : 1, logLevel: "error" });
        try {
            const model = await kiln.loadModel(bytes.slice(), { nCtx: CTX });
            // mt: the long prompt only (the batched path; st runs both)
            for (const prompt of build === "mt" ? PROMPTS.slice(1) : PROMPTS) {
                const tag = `${arch} ${wt} wasm-${engine} ${JSON.stringify(prompt.slice(0, 24))}`;
                const nat = native(file, prompt, repack);
                const input = await model.tokenize(prompt);
                if (firstDiff(input, nat.input) >= 0) {
                    line(false, `${tag}: prompt ids wasm [${input}] native [${nat.input}]`);
                    cell.pass = false;
                    continue;
                }
                const r = await model.complete(prompt, { maxTokens: N_GEN, temperature: 0, logprobs: N_TOP });
                const n0 = nativeAfterPrompt(file, nat, repack);
                const d0 = Math.max(...r.logprobs[0].top.map((t) => Math.abs(t.logprob - n0[t.token])));
                cell.d0 = Math.max(cell.d0, d0);
                line(d0 <= tol0(arch, wt), `${tag}: log-probs after the prompt (top-${N_TOP}) |diff| ${d0.toExponential(1)} (tol ${tol0(arch, wt)})`);
                if (d0 > tol0(arch, wt)) cell.pass = false;
                const d = firstDiff(r.tokens, nat.ids);
                cell.total += nat.ids.length;
                if (d < 0) {
                    cell.equal += nat.ids.length;
                    line(nat.ids.length === N_GEN, `${tag}: ${nat.ids.length} greedy tokens equal to native`);
                    if (nat.ids.length !== N_GEN) cell.pass = false;
                    continue;
                }
                cell.equal += d;
                let detail = `first difference at ${d}: wasm ${r.tokens.slice(d, d + 4)} native ${nat.ids.slice(d, d + 4)}`;
                let nearTie = false;
                if (d < r.tokens.length && d < nat.ids.length) {
                    const nl = nativeLogprobs(file, nat.input, nat.ids, d, repack);
                    const top = r.logprobs[d].top;
                    const a = nat.ids[d], b = r.tokens[d];
                    const nTop = [...nl.keys()].sort((x, y) => nl[y] - nl[x]).slice(0, 2);
                    const drift = Math.max(...top.map((t) => Math.abs(t.logprob - nl[t.token])));
                    // both picks near the best on both engines (three-way ties included)
                    const lw = (t) => top.find((x) => x.token === t)?.logprob ?? -Infinity;
                    const lim = driftAt(arch);
                    nearTie = top[0].token === b && nTop[0] === a && lw(b) - lw(a) <= lim && nl[a] - nl[b] <= lim && drift <= lim;
                    detail += `; wasm top-2 ${b} ${top[1]?.token} (gap ${(top[0].logprob - (top[1]?.logprob ?? -Infinity)).toExponential(2)}), ` +
                        `native top-2 ${nTop[0]} ${nTop[1]} (gap ${(nl[nTop[0]] - nl[nTop[1]]).toExponential(2)}), ` +
                        `max |dlogprob| over wasm's top-${top.length} ${drift.toExponential(2)} (limit ${lim})`;
                }
                if (nearTie) cell.nearTie = true;
                else cell.pass = false;
                line(nearTie, `${tag}: ${nearTie ? "equal up to a near-tie; " : ""}${detail}`);
            }
            model.free();
        } finally {
            kiln.destroy();
        }
    }
}

const cols = [...new Set(ARCHS.flatMap((a) => typesOf(a).flatMap((t) => enginesFor(a, t).map((e) => `${t}/${e}`))))];
console.log(`\n${"arch".padEnd(9)}${cols.map((c) => c.padEnd(23)).join("")}  (tokens equal to native Kiln's, * near-tie; max |dlogprob| after the prompt)`);
for (const arch of ARCHS) {
    console.log(`${arch.padEnd(9)}${cols.map((c) => {
        const x = table[arch][c];
        if (!x) return "".padEnd(23);
        return `${x.pass ? "pass" : "FAIL"} ${x.equal}/${x.total}${x.nearTie ? "*" : ""} ${x.d0.toExponential(0)}`.padEnd(23);
    }).join("")}`);
}
console.log(`\n${passed} passed, ${failed} failed (engines: ${engines.join(", ")})`);
process.exit(failed ? 1 : 0);
