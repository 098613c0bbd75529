// Debug aid: per prompt position, max |log p_kiln - log p_llama.cpp|, and each
// side's distance from the first model given.
//   node tests/oracle/debug-pos.mjs PROMPT MODEL.gguf...
// env: KV32=1 F32 KV cache on both sides; FA=1 llama.cpp flash attention;
//      SINGLE=1 llama.cpp evaluates the prompt one token at a time.
import { spawnSync } from "node:child_process";
import { loadOracleLlama, oracleIsaArgs } from "./llamacpp.mjs";
const [,, prompt = "Once upon a time", ...models] = process.argv;
const llama = await loadOracleLlama();
const ls = (v) => { const m = Math.max(...v); const s = v.reduce((a, x) => a + Math.exp(x - m), 0); return v.map((x) => x - m - Math.log(s)); };
const out = {};
for (const m of models) {
  const lm = await llama.loadModel({ modelPath: m });
  const ctx = await lm.createContext({ contextSize: 256, threads: 1, flashAttention: !!process.env.FA, ...(process.env.KV32 ? { experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" } : {}) });
  const seq = ctx.getSequence();
  const input = [lm.tokens.bos, ...lm.tokenize(prompt)];
  let res;
  if (process.env.SINGLE) { res = []; for (const t of input) res.push((await seq.controlledEvaluate([[t, { generateNext: { probabilities: true, options: { temperature: 0 } } }]]))[0]); }
  else res = await seq.controlledEvaluate(input.map((t) => [t, { generateNext: { probabilities: true, options: { temperature: 0 } } }]));
  const L = res.map((r) => { const a = new Array(512); for (const [t, p] of r.next.probabilities) a[t] = Math.log(p); return a; });
  const k = spawnSync("build/bin/kiln-generate", ["-m", m, "-p", prompt, "-n", "0", "-t", "1", "--print-ids", "--print-logits", "99", ...oracleIsaArgs(), ...(process.env.KV32 ? ["--kv-f32"] : [])], { encoding: "utf8" }).stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => ls(JSON.parse(l).logits));
  out[m] = { L, k };
  const d = L.map((row, p) => Math.max(...row.map((x, j) => Math.abs(x - k[p][j]))));
  console.log(m.split("/").pop(), "kiln vs llama per pos:", d.map((x) => x.toExponential(1)).join(" "));
  await ctx.dispose(); await lm.dispose();
}
const base = out[models[0]];
for (const m of models.slice(1)) {
  const o = out[m];
  const dl = o.L.map((row, p) => Math.max(...row.map((x, j) => Math.abs(x - base.L[p][j]))));
  const dk = o.k.map((row, p) => Math.max(...row.map((x, j) => Math.abs(x - base.k[p][j]))));
  console.log(m.split("/").pop(), "vs", models[0].split("/").pop(), " llama:", dl.map((x) => x.toExponential(1)).join(" "), " kiln:", dk.map((x) => x.toExponential(1)).join(" "));
}
await llama.dispose();
