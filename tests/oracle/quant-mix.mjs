// kiln-quantize's llama-quantize mixes (q4_K_M, q5_K_M) against llama.cpp's
// own quantizer: llama_model_quantize of the libllama node-llama-cpp 3.21.1
// ships (tests/oracle/llama_quantize_ref.c, built here with cc), on F32
// random-weight models from kiln-synth-model of several architectures
// (untied and tied outputs, fused QKV, 8 experts with a router, layer counts
// that make the "more bits" layer pattern visible). For every tensor: the
// same type, and the same bytes (both use the reference quantizers, no
// importance matrix).
//
//   node tests/oracle/quant-mix.mjs [--build DIR]
import { spawnSync } from "node:child_process";
import { mkdirSync, openSync, readSync, closeSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadOracleLlama } from "./llamacpp.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
const buildDir = args.includes("--build") ? path.resolve(args[args.indexOf("--build") + 1]) : path.join(root, "build");
const bin = (n) => path.join(buildDir, "bin", n);
const dir = path.join(buildDir, "oracle-quant");
mkdirSync(dir, { recursive: true });

function run(cmd, argv, env = process.env) {
    const r = spawnSync(cmd, argv, { encoding: "utf8", maxBuffer: 256 << 20, env });
    if (r.error) throw r.error;
    if (r.status !== 0) throw new Error(`${path.basename(cmd)} ${argv.join(" ")} exited ${r.status}: ${r.stderr.slice(-2000)}`);
    return r.stdout;
}

// name -> { type, offset (absolute), bytes } from kiln-gguf info
function tensors(file) {
    const out = run(bin("kiln-gguf"), ["info", file]);
    const dataOff = Number(/data offset: (\d+)/.exec(out)[1]);
    const map = new Map();
    for (const m of out.matchAll(/^\s+\d+ (\S+)\s+(\S+)\s+\[[^\]]*\]\s+(\d+)\s+(\d+)$/gm)) {
        map.set(m[1], { type: m[2], offset: dataOff + Number(m[3]), bytes: Number(m[4]) });
    }
    return map;
}

function readAt(file, offset, n) {
    const fd = openSync(file, "r");
    const b = Buffer.alloc(n);
    readSync(fd, b, 0, n, offset);
    closeSync(fd);
    return b;
}

// make sure the pinned llama.cpp copy (build/llamacpp-cpu-haswell/) exists, then use its libllama
const llama = await loadOracleLlama();
await llama.dispose();
const libDir = path.join(root, "build", "llamacpp-cpu-haswell");
const lib = path.join(libDir, "libllama.v0.4.0.so");
const ref = path.join(dir, "llama_quantize_ref");
run("cc", ["-O1", "-o", ref, path.join(root, "tests/oracle/llama_quantize_ref.c"), "-ldl"]);

const vocab = (v) => path.join(root, "tests/data/vocab", `ggml-vocab-${v}.gguf`);
// arch, vocabulary, layers
const MODELS = [["llama", "llama-spm", 16], ["qwen3", "gpt-2", 12], ["phi3", "phi-3", 8], ["qwen3moe", "gpt-2", 8], ["gemma2", "llama-spm", 4]];
const MIXES = [["q4_K_M", 15], ["q5_K_M", 17]];
let passed = 0, failed = 0;
for (const [arch, v, layers] of MODELS) {
    const f32 = path.join(dir, `${arch}-${layers}-f32.gguf`);
    run(bin("kiln-synth-model"), [f32, "--arch", arch, "--type", "f32", "--layers", String(layers), "--vocab", vocab(v)]);
    for (const [mix, ftype] of MIXES) {
        const kf = path.join(dir, `${arch}-${mix}-kiln.gguf`), lf = path.join(dir, `${arch}-${mix}-llama.gguf`);
        run(bin("kiln-quantize"), [f32, kf, mix]);
        run(ref, [lib, f32, lf, String(ftype)], { ...process.env, LD_LIBRARY_PATH: libDir });
        const k = tensors(kf), l = tensors(lf);
        const diffs = [];
        const counts = {};
        for (const [name, lt] of l) {
            const kt = k.get(name);
            counts[lt.type] = (counts[lt.type] ?? 0) + 1;
            if (!kt) { diffs.push(`${name}: missing in Kiln's file`); continue; }
            if (kt.type !== lt.type) { diffs.push(`${name}: kiln ${kt.type}, llama.cpp ${lt.type}`); continue; }
            if (kt.bytes !== lt.bytes || !readAt(kf, kt.offset, kt.bytes).equals(readAt(lf, lt.offset, lt.bytes))) diffs.push(`${name} (${kt.type}): bytes differ`);
        }
        if (k.size !== l.size) diffs.push(`tensor count kiln ${k.size}, llama.cpp ${l.size}`);
        const ok = diffs.length === 0;
        ok ? passed++ : failed++;
        console.log(`${ok ? "ok  " : "FAIL"} ${arch} (${layers} layers) ${mix}: ${l.size} tensors, types ${JSON.stringify(counts)}` +
            (ok ? ", all types and bytes equal" : `\n  ${diffs.slice(0, 12).join("\n  ")}${diffs.length > 12 ? `\n  ... ${diffs.length} differences` : ""}`));
    }
}
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
