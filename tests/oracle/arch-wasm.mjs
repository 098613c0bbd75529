// Every decoder architecture in WebAssembly: the random-weight models of
// arch.mjs (every architecture x F32, F16, Q8_0, Q4_K; tests/oracle/arch-models.mjs),
// loaded through the npm package (js/dist) into each wasm engine that is
// built (st: one thread; mt: pthreads, 2 threads; and their relaxed-SIMD
// variants where Node runs relaxed SIMD), generate the same 48
// greedy tokens as native Kiln on the same file (kiln-generate, the scalar
// row), for both arch.mjs prompts, the prompt evaluated in one batch on both
// sides. Native Kiln is the link to llama.cpp: arch.mjs compares it with
// llama.cpp on these files.
//
// F32 must be equal token for token: its kernels sum in the same order on
// every ISA (relaxed SIMD: near-ties allowed, its multiply-adds may fuse).
// F16, Q8_0 and Q4_K dot products in wasm SIMD sum in an order of their own (neither the scalar row's nor the x86 rows'), and random
// models put many tokens within rounding of each other, so there the run may
// part at a near-tie: at the first differing step d, both engines'
// log-probabilities there (native: kiln-logits on the same ids; wasm: the
// top-8 log-probs the package reports) must agree within DRIFT, and each
// engine's pick must be the other's runner-up; the run then passes compared
// up to d, and the table marks it with *. Anything else fails.
//
//   node [--experimental-wasm-relaxed-simd] tests/oracle/arch-wasm.mjs [--build DIR] [--arch phi3,qwen3]
//        [--type f32,q8_0] [--engine st,mt,st-relaxed,mt-relaxed]
//   (needs npm run build:ts, at least one of wasm/dist/{st,mt}, and the native tools
//   kiln-synth-model, kiln-generate, kiln-logits, kiln-tokenize)
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ARCH_TYPES, ARCH_VOCAB, archModel } from "./arch-models.mjs";
import { firstDiff, logSoftmax, runTool as run } from "./compare.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(`--${k}`) ? args[args.indexOf(`--${k}`) + 1] : d);
const buildDir = path.resolve(opt("build", path.join(root, "build")));
const bin = (name) => path.join(buildDir, "bin", name);
const ARCHS = opt("arch", ARCH_VOCAB.map(([a]) => a).join(",")).split(",");
const TYPES = opt("type", ARCH_TYPES.join(",")).split(",");
const PROMPTS = ["Once upon a time", "The quick brown fox jumps over the lazy dog, and then it ran into the forest where"];
const N_GEN = 48;
const N_TOP = 8;
const CTX = 256;
// near-tie rule: max |log p_wasm - log p_native| over wasm's top-8 at the differing step
const DRIFT = 5e-2;

const { Kiln, relaxedSimdSupported } = await import(path.join(root, "js/dist/index.js"));
// the engines: SIMD128 builds always; the relaxed-SIMD ones where this Node
// runs relaxed SIMD (Node 22+, or Node 20 with --experimental-wasm-relaxed-simd)
const ENGINES = { st: ["st", "simd128"], mt: ["mt", "simd128"], "st-relaxed": ["st", "relaxed"], "mt-relaxed": ["mt", "relaxed"] };
const engines = opt("engine", relaxedSimdSupported() ? Object.keys(ENGINES).join(",") : "st,mt").split(",")
    .filter((e) => ENGINES[e] && existsSync(path.join(root, "wasm/dist", e, `kiln-${ENGINES[e][0]}.wasm`)));
if (!engines.length) {
    console.error("arch-wasm: no wasm engine built (bash scripts/build-wasm.sh)");
    process.exit(1);
}

// native Kiln's side, once per (file, prompt) for every engine
const nativeSeen = new Map();
function native(file, prompt) {
    const key = `${file}|${prompt}`;
    if (!nativeSeen.has(key)) {
        const ids = run(bin("kiln-generate"), ["-m", file, "-p", prompt, "-n", String(N_GEN), "-t", "1", "--ctx", String(CTX),
            "--print-ids", "--isa", "scalar"]).trim().split("\n").pop().trim().split(/\s+/).filter((x) => x !== "").map(Number);
        const input = run(bin("kiln-tokenize"), ["-m", file], prompt).trim().split(/\s+/).map(Number);
        nativeSeen.set(key, { ids, input });
    }
    return nativeSeen.get(key);
}
// native log-probs after input + ids[0..d) (the prompt as one batch, as kiln-generate evaluates it)
function nativeLogprobs(file, input, ids, d) {
    const out = run(bin("kiln-logits"), ["-m", file, "--ctx", String(CTX), "--ids", [...input, ...ids.slice(0, d)].join(","),
        "--batch", String(input.length), "--isa", "scalar"]);
    return logSoftmax(JSON.parse(out).logits);
}

let passed = 0, failed = 0;
const table = {};
const line = (ok, s) => { ok ? passed++ : failed++; console.log(`${ok ? "ok  " : "FAIL"} ${s}`); };

for (const arch of ARCHS) for (const wt of TYPES) {
    const file = archModel(buildDir, arch, wt);
    const bytes = new Uint8Array(readFileSync(file));
    for (const engine of engines) {
        const cell = ((table[arch] ??= {})[`${wt}/${engine}`] = { equal: 0, total: 0, nearTie: false, pass: true });
        const [build, simd] = ENGINES[engine];
        const kiln = await Kiln.create({ build, simd, threads: build === "mt" ? 2 : 1, logLevel: "error" });
        try {
            const model = await kiln.loadModel(bytes.slice(), { nCtx: CTX });
            for (const prompt of PROMPTS) {
                const tag = `${arch} ${wt} wasm-${engine} ${JSON.stringify(prompt.slice(0, 24))}`;
                const nat = native(file, prompt);
                const input = await model.tokenize(prompt);
                if (firstDiff(input, nat.input) >= 0) {
                    line(false, `${tag}: prompt ids wasm [${input}] native [${nat.input}]`);
                    cell.pass = false;
                    continue;
                }
                const r = await model.complete(prompt, { maxTokens: N_GEN, temperature: 0, logprobs: N_TOP });
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
                if ((wt !== "f32" || simd === "relaxed") && d < r.tokens.length && d < nat.ids.length) {
                    const nl = nativeLogprobs(file, nat.input, nat.ids, d);
                    const top = r.logprobs[d].top;
                    const a = nat.ids[d], b = r.tokens[d];
                    const nTop = [...nl.keys()].sort((x, y) => nl[y] - nl[x]).slice(0, 2);
                    const drift = Math.max(...top.map((t) => Math.abs(t.logprob - nl[t.token])));
                    nearTie = top[0].token === b && top[1]?.token === a && nTop[0] === a && nTop[1] === b && drift <= DRIFT;
                    detail += `; wasm top-2 ${b} ${top[1]?.token} (gap ${(top[0].logprob - (top[1]?.logprob ?? -Infinity)).toExponential(2)}), ` +
                        `native top-2 ${nTop[0]} ${nTop[1]} (gap ${(nl[nTop[0]] - nl[nTop[1]]).toExponential(2)}), ` +
                        `max |dlogprob| over wasm's top-${top.length} ${drift.toExponential(2)} (limit ${DRIFT})`;
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

const cols = TYPES.flatMap((t) => engines.map((e) => `${t}/${e}`));
console.log(`\n${"arch".padEnd(9)}${cols.map((c) => c.padEnd(15)).join("")}  (tokens equal to native Kiln's; * near-tie)`);
for (const arch of ARCHS) {
    console.log(`${arch.padEnd(9)}${cols.map((c) => {
        const x = table[arch][c];
        return `${x.pass ? "pass" : "FAIL"} ${x.equal}/${x.total}${x.nearTie ? "*" : ""}`.padEnd(15);
    }).join("")}`);
}
console.log(`\n${passed} passed, ${failed} failed (engines: ${engines.join(", ")})`);
process.exit(failed ? 1 : 0);
