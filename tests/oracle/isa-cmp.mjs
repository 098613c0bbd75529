// Debug aid: Kiln against itself, scalar vs AVX2 kernels, per prompt position
// (max |dlogprob|): the size of rounding flips that are not llama.cpp's doing.
//   node tests/oracle/isa-cmp.mjs MODEL.gguf PROMPT [kiln-generate args...]
import { spawnSync } from "node:child_process";
const [,, m, p, ...extra] = process.argv;
const ls = (v) => { const mx = Math.max(...v); const s = v.reduce((a, x) => a + Math.exp(x - mx), 0); return v.map((x) => x - mx - Math.log(s)); };
const get = (isa) => spawnSync("build/bin/kiln-generate", ["-m", m, "-p", p, "-n", "1", "-t", "1", "--print-ids", "--print-logits", "99", "--isa", isa, ...extra], { encoding: "utf8", maxBuffer: 1 << 30 }).stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => ls(JSON.parse(l).logits));
const a = get("scalar"), b = get("avx2");
console.log(m.split("/").pop(), "scalar vs avx2 per pos:", a.map((r, i) => Math.max(...r.map((x, j) => Math.abs(x - b[i][j]))).toExponential(1)).join(" "));
