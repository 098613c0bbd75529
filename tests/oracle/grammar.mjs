// Grammar-constrained generation, Kiln against llama.cpp (node-llama-cpp,
// the CPU variant pinned by llamacpp.mjs) and a JSON Schema validator (ajv).
//
//   node tests/oracle/grammar.mjs [--build DIR] [--json FILE]
//
// For every GBNF grammar in tests/data/grammars/ (llama.cpp's examples and
// Kiln's own) and every JSON Schema in tests/data/json-schemas/ (converted by
// `kiln-generate --print-grammar`), on stories260K and the q4_0 fixture:
//
//  - sampled runs (seeds x temperatures) and a greedy run of kiln-generate
//    with --grammar-file / --json-schema: every generated token is fed to
//    llama.cpp's grammar engine, which must allow it (and allow the end of
//    generation where Kiln stopped); for schemas, every output must end (EOG)
//    and parse, and ajv must validate it against the schema;
//  - the greedy run token for token against llama.cpp's grammar sampler
//    (LlamaGrammar + sequence evaluation at temperature 0) on the same GBNF.
//
// Prints one line per failed check, a summary table, and "N passed, N failed".
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { LlamaGrammar, LlamaGrammarEvaluationState } from "node-llama-cpp";
import { describeOracle, loadOracleLlama, oracleIsaArgs } from "./llamacpp.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
let buildDir = path.join(root, "build");
let jsonOut = null;
for (let i = 0; i < args.length; i++) {
    if (args[i] === "--build") buildDir = path.resolve(args[++i]);
    else if (args[i] === "--json") jsonOut = path.resolve(args[++i]);
}
const kilnGenerate = path.join(buildDir, "bin", "kiln-generate");

const SEEDS = [1, 2];
const TEMPS = [0.8, 1.3];
const N_MAX = 400;        // tokens per sampled run (every schema here is bounded well below this)
const N_GREEDY = 160;     // tokens compared with llama.cpp's greedy grammar sampler
const PROMPT = "Once upon a time";

let passed = 0, failed = 0;
function check(ok, what, detail = "") {
    if (ok) passed++;
    else {
        failed++;
        console.log(`FAIL ${what}${detail ? "  " + detail : ""}`);
    }
    return ok;
}

function run(argv) {
    const r = spawnSync(kilnGenerate, argv, { encoding: "utf8", maxBuffer: 64 << 20 });
    if (r.status !== 0) throw new Error(`kiln-generate ${argv.join(" ")}: ${r.stderr}`);
    return r;
}

function kilnIds(model, source, extra) {
    const r = run(["-m", model, "-p", PROMPT, "--ctx", "512", "--print-ids", ...source, ...oracleIsaArgs(), ...extra]);
    const ids = r.stdout.trim() ? r.stdout.trim().split(/\s+/).map(Number) : [];
    const m = /generated (\d+) tokens/.exec(r.stderr);
    return { ids, generated: m ? Number(m[1]) : -1 };
}

// ---- inputs
const grammarDir = path.join(root, "tests/data/grammars");
const schemaDir = path.join(root, "tests/data/json-schemas");
const cases = [];
for (const f of readdirSync(grammarDir).filter((f) => f.endsWith(".gbnf")).sort()) {
    const file = path.join(grammarDir, f);
    cases.push({ name: f, kind: "gbnf", file, source: ["--grammar-file", file], gbnf: readFileSync(file, "utf8") });
}
for (const f of readdirSync(schemaDir).filter((f) => f.endsWith(".json")).sort()) {
    const file = path.join(schemaDir, f);
    const gbnf = run(["--json-schema", file, "--print-grammar"]).stdout;
    cases.push({ name: f, kind: "schema", file, source: ["--json-schema", file], gbnf, schema: JSON.parse(readFileSync(file, "utf8")) });
}
const models = [path.join(root, "models/stories260K.gguf"), path.join(root, "build/oracle/stories260K-pad-q4_0.gguf")]
    .filter((m) => check(existsSync(m), `model ${path.relative(root, m)} present`, "(scripts/make-oracle-fixtures.sh makes the fixture)"));

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv, { mode: "fast" }); // the grammar's date allows e.g. 02-31, as llama.cpp's does

const llama = await loadOracleLlama();
console.log(`grammar oracle: ${describeOracle(llama)}; ${cases.length} grammars (${cases.filter((c) => c.kind === "schema").length} from JSON schemas), ${models.length} models`);

const summary = [];
for (const model of models) {
    const lm = await llama.loadModel({ modelPath: model });
    const ctx = await lm.createContext({ contextSize: 512, batchSize: 512, threads: 1, sequences: 1 });
    const seq = ctx.getSequence();
    const mname = path.basename(model, ".gguf");
    const row = { model: mname, runs: 0, tokens: 0, tokensAllowed: 0, schemaOutputs: 0, schemaValid: 0, gbnfComplete: 0, gbnfRuns: 0, greedyEqual: 0, greedyRuns: 0, greedyTokensEqual: 0, greedyTokens: 0 };
    const eos = lm.tokens.eos;
    const input = [lm.tokens.bos, ...lm.tokenize(PROMPT)];

    for (const c of cases) {
        let grammar;
        try {
            grammar = new LlamaGrammar(llama, { grammar: c.gbnf });
        } catch (e) {
            check(false, `${c.name}: llama.cpp parses the grammar`, String(e));
            continue;
        }
        const validate = c.kind === "schema" ? ajv.compile(c.schema) : null;

        // sampled runs and the greedy one: every token allowed by llama.cpp's grammar
        const runs = [{ temp: 0, seed: 0 }, ...SEEDS.flatMap((seed) => TEMPS.map((temp) => ({ temp, seed })))];
        let greedyIds = null, greedyEnded = false;
        for (const { temp, seed } of runs) {
            const k = kilnIds(model, c.source, ["-n", String(temp === 0 ? N_GREEDY : N_MAX), "--temp", String(temp), "--seed", String(seed)]);
            const tag = `${mname} ${c.name} temp ${temp} seed ${seed}`;
            const ended = k.generated === k.ids.length && k.ids.length < (temp === 0 ? N_GREEDY : N_MAX);
            if (temp === 0) {
                greedyIds = k.ids;
                greedyEnded = ended;
            }
            const state = new LlamaGrammarEvaluationState({ model: lm, grammar });
            let bad = -1;
            for (let i = 0; i < k.ids.length; i++) {
                if (!llama._bindings.AddonSampler.canBeNextTokenForGrammarEvaluationState(state._state, k.ids[i])) {
                    bad = i;
                    break;
                }
                llama._bindings.AddonSampler.acceptGrammarEvaluationStateToken(state._state, k.ids[i]);
            }
            row.runs++;
            row.tokens += k.ids.length;
            row.tokensAllowed += bad < 0 ? k.ids.length : bad;
            check(bad < 0, `${tag}: llama.cpp's grammar allows every token`,
                bad < 0 ? "" : `token ${bad} (${k.ids[bad]} ${JSON.stringify(lm.detokenize([k.ids[bad]]))}) after ${JSON.stringify(lm.detokenize(k.ids.slice(0, bad)))}`);
            if (bad >= 0) continue;
            if (ended) {
                check(llama._bindings.AddonSampler.canBeNextTokenForGrammarEvaluationState(state._state, eos),
                    `${tag}: llama.cpp's grammar is complete where Kiln ended`, JSON.stringify(lm.detokenize(k.ids)));
            }
            const text = lm.detokenize(k.ids);
            if (c.kind === "gbnf") {
                row.gbnfRuns++;
                if (ended) row.gbnfComplete++;
                continue;
            }
            row.schemaOutputs++;
            if (!check(ended, `${tag}: the output ends (EOG) within ${temp === 0 ? N_GREEDY : N_MAX} tokens`, JSON.stringify(text.slice(0, 200)))) continue;
            let value, parsed = true;
            try {
                value = JSON.parse(text);
            } catch (e) {
                parsed = false;
            }
            if (!check(parsed, `${tag}: output parses as JSON`, JSON.stringify(text))) continue;
            const ok = validate(value);
            if (check(ok, `${tag}: ajv validates the output`, `${JSON.stringify(text)} ${JSON.stringify(validate.errors)}`)) row.schemaValid++;
        }

        // greedy: llama.cpp's grammar sampler token for token
        await seq.clearHistory();
        const state = new LlamaGrammarEvaluationState({ model: lm, grammar });
        const ref = [];
        let refEnded = false;
        for await (const t of seq.evaluate(input, { temperature: 0, grammarEvaluationState: state, yieldEogToken: true })) {
            if (lm.isEogToken(t)) {
                refEnded = true;
                break;
            }
            ref.push(t);
            if (ref.length >= N_GREEDY) break;
        }
        let d = 0;
        while (d < ref.length && d < greedyIds.length && ref[d] === greedyIds[d]) d++;
        const equal = d === ref.length && d === greedyIds.length && refEnded === greedyEnded;
        row.greedyRuns++;
        row.greedyTokens += ref.length;
        row.greedyTokensEqual += d;
        if (equal) row.greedyEqual++;
        check(equal, `${mname} ${c.name}: greedy tokens equal llama.cpp's grammar sampler`,
            `first diff at ${d}: kiln ${greedyIds.slice(d, d + 4)} llama.cpp ${ref.slice(d, d + 4)} (kiln ${greedyIds.length}${greedyEnded ? " + EOG" : ""}, llama.cpp ${ref.length}${refEnded ? " + EOG" : ""})`);
    }
    summary.push(row);
    await ctx.dispose();
    await lm.dispose();
}

console.log("\nmodel                       runs  tokens allowed     schema outputs valid  gbnf complete  greedy equal (tokens)");
for (const r of summary) {
    console.log(`${r.model.padEnd(27)} ${String(r.runs).padStart(4)}  ${String(r.tokensAllowed).padStart(6)}/${String(r.tokens).padEnd(6)}   ` +
        `${String(r.schemaValid).padStart(4)}/${String(r.schemaOutputs).padEnd(4)}          ${String(r.gbnfComplete).padStart(3)}/${String(r.gbnfRuns).padEnd(3)}      ` +
        `${r.greedyEqual}/${r.greedyRuns} (${r.greedyTokensEqual}/${r.greedyTokens})`);
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ passed, failed, models: summary }, null, 1));
console.log(`\n${passed} passed, ${failed} failed`);
await llama.dispose();
process.exit(failed ? 1 : 0);
