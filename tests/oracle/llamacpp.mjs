// The llama.cpp every oracle test and the peers benchmark compare against:
// node-llama-cpp 3.21.1's prebuilt CPU build with ONE fixed ggml CPU variant.
//
// ggml ships its CPU backend as several libggml-cpu-<variant>.so next to
// llama-addon.node; node-llama-cpp calls ggml_backend_load_all_from_path() on
// that directory, which loads every variant, scores each against the CPU it
// runs on and keeps the best (haswell on an AVX2 machine, zen4 / icelake /
// sapphirerapids... on AVX-512 ones). The variants sum in different orders, so
// on an AVX-512 machine llama.cpp's results differ by rounding from the same
// build on an AVX2 one. To compare against the same numbers on every x86-64
// machine, loadOracleLlama() builds a directory holding the addon, its shared
// libraries and only libggml-cpu-haswell.so (build/llamacpp-cpu-haswell/,
// copies) and hands that addon to node-llama-cpp; the loader then finds that
// one variant only. Which variant was mapped is checked in /proc/self/maps,
// and loading fails if it is not the pinned one.
//
// Kiln's side of the same pin: oracleIsa() is the kernel-table row whose
// summation order mirrors the pinned variant (kiln-generate --isa).
//
//   KILN_ORACLE_GGML_CPU=zen4|skylakex|...   pin another variant (debugging)
//   KILN_ORACLE_GGML_CPU=auto                ggml's own choice (unpinned)
//   KILN_ORACLE_ISA=avx512|avx2|scalar       the Kiln row to compare
//
// On linux-arm64 (scripts/test-arm-oracle.sh runs this under qemu) nothing
// is pinned unless KILN_ORACLE_GGML_CPU names a variant (armv8.0_1,
// armv8.2_2, ...); KILN_ORACLE_LLAMA_BINS may name the directory holding
// @node-llama-cpp/linux-arm64's llama-addon.node and its libraries.
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { getLlama, Llama, LlamaLogLevel } from "node-llama-cpp";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const require = createRequire(import.meta.url);

/** The ggml CPU variant the oracle pins on x86-64 ("haswell": AVX2 + FMA + F16C). */
export const PINNED_GGML_CPU = "haswell";

const isX64Linux = process.platform === "linux" && process.arch === "x64";
const isArm64Linux = process.platform === "linux" && process.arch === "arm64";

/** The variant to load: null means ggml's own choice. */
export function wantedGgmlCpu(choice = undefined) {
    const env = choice ?? process.env.KILN_ORACLE_GGML_CPU;
    if (env === "auto") return null;
    if (env) return env;
    return isX64Linux ? PINNED_GGML_CPU : null;
}

/** Kiln's kernel-table row that sums as the pinned ggml variant (null: Kiln's default). */
export function oracleIsa() {
    if (process.env.KILN_ORACLE_ISA) return process.env.KILN_ORACLE_ISA;
    return isX64Linux && wantedGgmlCpu() === PINNED_GGML_CPU ? "avx2" : null;
}

/** kiln-generate arguments selecting oracleIsa() (empty when none is forced). */
export function oracleIsaArgs() {
    const isa = oracleIsa();
    return isa ? ["--isa", isa] : [];
}

/** The ggml CPU variants mapped into this process (from /proc/self/maps). */
export function loadedGgmlCpuVariants() {
    if (process.platform !== "linux") return [];
    const maps = readFileSync("/proc/self/maps", "utf8");
    const found = new Set();
    for (const m of maps.matchAll(/libggml-cpu-([A-Za-z0-9_.]+)\.so/g)) found.add(m[1]);
    return [...found].sort();
}

function prebuiltBinsDir() {
    // the package's main is dist/index.js; its binaries are in bins/linux-<arch>
    const plat = `linux-${process.arch}`;
    const dir = process.env.KILN_ORACLE_LLAMA_BINS ??
        path.join(path.resolve(path.dirname(require.resolve(`@node-llama-cpp/${plat}`)), ".."), "bins", plat);
    if (!existsSync(path.join(dir, "llama-addon.node"))) throw new Error(`llamacpp: no llama-addon.node in ${dir}`);
    return dir;
}

// A copy of the prebuilt directory without the CPU variants other than `variant`.
function pinnedBinsDir(variant) {
    const src = prebuiltBinsDir();
    const files = readdirSync(src);
    if (!files.includes(`libggml-cpu-${variant}.so`)) {
        const have = files.filter((f) => f.startsWith("libggml-cpu-")).map((f) => f.slice(12, -3));
        throw new Error(`llamacpp: no ggml CPU variant '${variant}' in ${src} (have: ${have.join(", ")})`);
    }
    const dst = path.join(root, "build", `llamacpp-cpu-${variant}`);
    mkdirSync(dst, { recursive: true });
    for (const f of files) {
        if (f.startsWith("libggml-cpu-") && f !== `libggml-cpu-${variant}.so`) continue;
        const from = path.join(src, f), to = path.join(dst, f);
        const a = statSync(from);
        if (existsSync(to)) {
            const b = statSync(to);
            if (b.size === a.size && b.mtimeMs >= a.mtimeMs) continue;
        }
        // copy, then rename over: a process that has the old file mapped
        // keeps it intact (never truncated under it), and a concurrent
        // loader sees either the old file or the whole new one
        const tmp = `${to}.tmp-${process.pid}`;
        copyFileSync(from, tmp);
        renameSync(tmp, to);
    }
    return dst;
}

/**
 * node-llama-cpp's Llama (CPU only, never builds) with the ggml CPU variant
 * pinned as above. opts: logLevel, logger, maxThreads (as getLlama's);
 * ggmlCpu: "auto" (ggml's choice, for benchmarks) or a variant name instead
 * of the pin (default: KILN_ORACLE_GGML_CPU, else haswell on x86-64).
 */
export async function loadOracleLlama(opts = {}) {
    const { ggmlCpu, ...rest } = opts;
    const base = { logLevel: LlamaLogLevel.error, ...rest };
    const variant = wantedGgmlCpu(ggmlCpu);
    if (!variant) return getLlama({ gpu: false, build: "never", ...base });
    if (!isX64Linux && !isArm64Linux) throw new Error(`llamacpp: pinning a ggml CPU variant is implemented for linux-x64 and linux-arm64 only (KILN_ORACLE_GGML_CPU=auto)`);
    const dir = pinnedBinsDir(variant);
    const bindingPath = path.join(dir, "llama-addon.node");
    const buildMetadata = JSON.parse(readFileSync(path.join(dir, "_nlcBuildMetadata.json"), "utf8"));
    // what getLlama does for a prebuilt binary, minus its search and its
    // test-load in a child process (Llama._create is node-llama-cpp 3.21.1's
    // own constructor path; the version is pinned in package.json)
    const bindings = require(bindingPath);
    const llama = await Llama._create({
        bindings, bindingPath, buildType: "prebuilt", buildMetadata,
        logLevel: base.logLevel, logger: base.logger, maxThreads: base.maxThreads,
        vramPadding: 0, ramPadding: 0, skipLlamaInit: false, debug: false,
    });
    const loaded = loadedGgmlCpuVariants();
    if (loaded.length !== 1 || loaded[0] !== variant) {
        await llama.dispose();
        throw new Error(`llamacpp: wanted ggml CPU variant ${variant}, the process has [${loaded.join(", ")}] mapped`);
    }
    return llama;
}

/** One line naming what the comparison runs: the ggml variant and Kiln's row. */
export function describeOracle() {
    const v = loadedGgmlCpuVariants();
    return `llama.cpp ggml CPU variant: ${v.join(",") || "(none mapped)"}${wantedGgmlCpu() ? " (pinned)" : " (ggml's choice)"}; ` +
        `Kiln kernel row: ${oracleIsa() ?? "default"}`;
}

/**
 * llama.cpp's greedy continuation on a context sequence (node-llama-cpp),
 * the prompt evaluated one token at a time (the mat-vec path Kiln's
 * --batch 1 mirrors): `probs`, the next-token probabilities after each of
 * the first nLogitPos prompt tokens; `ids`, up to nGen greedy tokens (fewer
 * at an end-of-generation token).
 */
export async function greedyOneByOne(seq, input, nGen, nLogitPos, isEog) {
    await seq.clearHistory();
    const greedy = { temperature: 0 };
    const probs = [];
    let res = null;
    for (let i = 0; i < input.length; i++) {
        const last = i === input.length - 1;
        const r = await seq.controlledEvaluate([[input[i], i < nLogitPos || last ? { generateNext: { probabilities: i < nLogitPos, token: last, options: greedy } } : undefined]]
            .map(([t, o]) => (o ? [t, o] : t)));
        if (i < nLogitPos) probs.push(r[0].next.probabilities);
        if (last) res = r[0];
    }
    const ids = [];
    let next = res.next.token;
    while (ids.length < nGen && next != null && !isEog(next)) {
        ids.push(next);
        if (ids.length === nGen) break;
        const r = await seq.controlledEvaluate([[next, { generateNext: { token: true, options: greedy } }]]);
        next = r[0].next.token;
    }
    return { probs, ids };
}

/** the greedy pick and the distribution llama.cpp draws the next token from after `tokens` (one at a time) */
export async function nextAfter(seq, tokens) {
    await seq.clearHistory();
    let nx = null;
    for (let i = 0; i < tokens.length; i++) {
        const last = i === tokens.length - 1;
        const r = await seq.controlledEvaluate([last ? [tokens[i], { generateNext: { probabilities: true, token: true, options: { temperature: 0 } } }] : tokens[i]]);
        if (last) nx = r[0].next;
    }
    return nx;
}
