// Two builds of the wasm engines on the same models: the same prompt ids,
// the same greedy tokens and bit-identical log-probs (the top-8 of every
// generated step). For changes that must not move results, e.g. x4 kernels
// that keep their plain kernel's order (src/cpu/repack.h): A = the engines
// built before the change, B = after. The models are arch-models.mjs's
// random-weight decoders.
//   node [--experimental-wasm-relaxed-simd] tests/oracle/wasm-ab.mjs --a DIR [--b DIR] [--engine st-relaxed,mt-relaxed]
//        [--arch llama,qwen3] [--type iq4_nl] [--build DIR] [--tokens 48] [--model FILE.gguf,...]
//   DIR: a folder laid out as wasm/dist (st/, mt/, st-relaxed/, mt-relaxed/); --b: this tree's wasm/dist.
//   --model: these files instead of the random-weight models (e.g. bench/peers' synthetic ones).
//   (needs npm run build:ts and the native kiln-synth-model)
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { archModel } from "./arch-models.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(`--${k}`) ? args[args.indexOf(`--${k}`) + 1] : d);
const dirA = opt("a", null), dirB = opt("b", path.join(root, "wasm/dist"));
if (!dirA) {
    console.error("wasm-ab: --a DIR (the engines to compare against) is required");
    process.exit(2);
}
const buildDir = path.resolve(opt("build", path.join(root, "build")));
const ENGINES = { st: ["st", "simd128"], mt: ["mt", "simd128"], "st-relaxed": ["st", "relaxed"], "mt-relaxed": ["mt", "relaxed"] };
const engines = opt("engine", "st-relaxed,mt-relaxed").split(",");
const archs = opt("arch", "llama,qwen3").split(",");
const types = opt("type", "iq4_nl").split(",");
const nGen = +opt("tokens", 48);
const PROMPTS = ["Once upon a time", "The quick brown fox jumps over the lazy dog, and then it ran into the forest where"];

const { Kiln } = await import(path.join(root, "js/dist/index.js"));
const url = (d) => pathToFileURL(path.resolve(d) + "/").href;

async function runAll(dir, engine, bytes) {
    const [build, simd] = ENGINES[engine];
    const kiln = await Kiln.create({ build, simd, threads: build === "mt" ? 2 : 1, logLevel: "error", wasmUrl: url(dir) });
    try {
        const model = await kiln.loadModel(bytes.slice(), { nCtx: 256 });
        const out = { isa: kiln.info().isa, variant: kiln.info().build, runs: [] };
        for (const prompt of PROMPTS) {
            const ids = await model.tokenize(prompt);
            const r = await model.complete(prompt, { maxTokens: nGen, temperature: 0, logprobs: 8 });
            out.runs.push({ ids, tokens: r.tokens, logprobs: r.logprobs.map((s) => s.top.map((t) => [t.token, t.logprob])) });
        }
        model.free();
        return out;
    } finally {
        kiln.destroy();
    }
}

let passed = 0, failed = 0;
const line = (ok, s) => { ok ? passed++ : failed++; console.log(`${ok ? "ok  " : "FAIL"} ${s}`); };
// float64 bits of a log-prob (what the package hands out), for an exact comparison
const bits = (x) => { const b = new DataView(new ArrayBuffer(8)); b.setFloat64(0, x); return b.getBigUint64(0); };

const models = opt("model", null)?.split(",").map((f) => [path.basename(f), f]) ??
    archs.flatMap((arch) => types.map((wt) => [`${arch} ${wt}`, archModel(buildDir, arch, wt)]));
for (const [name, file] of models) {
    const bytes = new Uint8Array(readFileSync(file));
    for (const engine of engines) {
        const t0 = performance.now();
        const a = await runAll(dirA, engine, bytes);
        const t1 = performance.now();
        const b = await runAll(dirB, engine, bytes);
        const t2 = performance.now();
        const tag = `${name} ${engine} (A ${a.isa}, B ${b.isa}; load + ${PROMPTS.length} completions A ${((t1 - t0) / 1e3).toFixed(1)} s, B ${((t2 - t1) / 1e3).toFixed(1)} s)`;
        line(a.isa === b.isa, `${tag}: same kernel table`);
        for (let p = 0; p < PROMPTS.length; p++) {
            const ra = a.runs[p], rb = b.runs[p];
            const t = `${tag} ${JSON.stringify(PROMPTS[p].slice(0, 16))}`;
            line(ra.ids.join() === rb.ids.join(), `${t}: prompt ids equal (${ra.ids.length})`);
            line(ra.tokens.join() === rb.tokens.join(), `${t}: ${rb.tokens.length} greedy tokens equal`);
            let n = 0, diff = 0, maxd = 0;
            for (let s = 0; s < Math.min(ra.logprobs.length, rb.logprobs.length); s++) {
                for (let k = 0; k < ra.logprobs[s].length; k++) {
                    const [ta, la] = ra.logprobs[s][k], [tb, lb] = rb.logprobs[s][k] ?? [-1, NaN];
                    n++;
                    if (ta !== tb || bits(la) !== bits(lb)) { diff++; maxd = Math.max(maxd, Math.abs(la - lb) || Infinity); }
                }
            }
            line(diff === 0 && n > 0, `${t}: top-8 log-probs of every step bit-identical (${n - diff}/${n}${diff ? `, max |diff| ${maxd.toExponential(2)}` : ""})`);
        }
    }
}
console.log(`\n${passed} passed, ${failed} failed (A ${dirA}, B ${dirB})`);
process.exit(failed ? 1 : 0);
