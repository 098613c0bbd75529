// Developer check (not CI): wasm f32 GEMM time, llama.cpp's order (mul_mat's
// ggml order: a leaf weight times f32 activations) against Kiln's packed
// GEMM (the same product with the activations given as f16, which mul_mat
// converts to f32 and multiplies through the packed path), in one process,
// interleaved; prints medians and their ratio with the load average.
//   node [--experimental-wasm-relaxed-simd] scripts/gemm-order-bench.mjs [simd128|relaxed] [REPS]
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { Kiln } = await import(path.join(root, 'js/dist/index.js'));
const simd = process.argv[2] ?? 'simd128';
const reps = Number(process.argv[3] ?? 7);
const kiln = await Kiln.create({ build: 'st', simd, threads: 1, logLevel: 'error' });
function rand(n, seed) {
  const a = new Float32Array(n); let s = seed >>> 0;
  for (let i = 0; i < n; i++) { s = (s * 1664525 + 1013904223) >>> 0; a[i] = (s / 2 ** 32) * 2 - 1; }
  return a;
}
const f16 = (a) => { const o = new Uint16Array(a.length); const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  for (let i = 0; i < a.length; i++) { f[0] = a[i]; const x = u[0]; o[i] = ((x >>> 16) & 0x8000) | ((((x >>> 23) & 0xff) - 112) << 10) | ((x >>> 13) & 0x3ff); } return o; };
const median = (v) => [...v].sort((a, b) => a - b)[v.length >> 1];
for (const [k, n, m] of [[1024, 1024, 1024], [384, 1536, 17], [64, 172, 13]]) {
  const W = kiln.tensor(rand(k * n, 1), [k, n]);
  const X = kiln.tensor(rand(k * m, 2), [k, m]);
  const X16 = kiln.tensor(f16(rand(k * m, 2)), [k, m]);
  const inner = Math.max(1, Math.round(2e8 / (2 * k * n * m)));
  const t = { ggml: [], packed: [] };
  for (let r = 0; r < reps; r++) {
    for (const [name, x] of [['ggml', X], ['packed', X16]]) {
      const t0 = performance.now();
      for (let i = 0; i < inner; i++) await W.matmul(x).data();
      t[name].push((performance.now() - t0) / inner);
    }
  }
  const g = median(t.ggml), p = median(t.packed);
  console.log(JSON.stringify({ simd, k, n, m, ms_ggml_order: +g.toFixed(3), ms_packed: +p.toFixed(3), ratio: +(g / p).toFixed(2),
    gflops_ggml: +(2 * k * n * m / g / 1e6).toFixed(2), gflops_packed: +(2 * k * n * m / p / 1e6).toFixed(2), loadavg: os.loadavg().map((x) => +x.toFixed(1)) }));
}
kiln.destroy();
